from memctl.cli.main import run

run()
