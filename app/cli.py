"""Console script placeholder until the service lands."""
def main() -> None:
    raise SystemExit("streamtree serve: the service is not built yet")
