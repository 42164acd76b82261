# The README's two commands. Both first bring the project-local virtual environment .venv/ up to date with
# scripts/bootstrap.sh (a CPU or CUDA build of PyTorch to suit this machine, then daybreak and its test extras;
# instant when nothing changed).
#
#   make run                    # `daybreak run`: the offline default, digits to 98%
#   make run ARGS="mnist --instance gcp-g2-standard-4"
#   make test                   # the test suite; `make test ARGS="-m slow"` for the slow tests
#   make venv                   # only set up .venv
#   make docs                   # the documentation site in site/ (mkdocs build --strict; `mkdocs serve` to read it)

ARGS ?=

.PHONY: run test venv docs

run: venv
	.venv/bin/daybreak run $(ARGS)

test: venv
	.venv/bin/pytest $(ARGS)

venv:
	@bash scripts/bootstrap.sh

docs: venv
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict
