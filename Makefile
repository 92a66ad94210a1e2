# Convenience targets; the README's two commands are scripts/demo.sh and scripts/test.sh.
.PHONY: setup demo test test-fast lint bench
setup:
	bash scripts/setup.sh
demo:
	bash scripts/demo.sh
test:
	bash scripts/test.sh
test-fast:
	bash scripts/test.sh -m "not slow" -x
lint:
	bash scripts/setup.sh && .venv/bin/ruff check .
bench:
	.venv/bin/python benchmarks/run_all.py
