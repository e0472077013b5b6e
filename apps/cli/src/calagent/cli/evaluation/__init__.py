"""The route eval: case files, the runner that drives them through the whole system over HTTP, and
the report. `calagent eval offline|live` is `calagent.cli.evaluate.run_eval`."""
