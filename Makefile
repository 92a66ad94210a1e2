# Convenience targets; the README's two commands are scripts/demo.sh and scripts/test.sh.
.PHONY: setup demo test test-fast bench
setup:
	bash scripts/setup.sh
demo:
	bash scripts/demo.sh
test:
	bash scripts/test.sh
test-fast:
	bash scripts/test.sh -m "not slow" -x
bench:
	.venv/bin/python benchmarks/run_all.py
