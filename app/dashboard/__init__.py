"""The browser dashboard: its vendored assets and its sign-in cookie (routes: ``app.routers.dashboard``)."""
