# Sourced by the scripts: make sure .venv exists and has this project installed (with dev extras).
# Re-installs when pyproject.toml changed since the last install.
ensure_venv() {
    local python=${PYTHON:-python3}
    if [ ! -x .venv/bin/python ]; then
        "$python" -m venv .venv
    fi
    if [ ! -f .venv/.installed ] || [ pyproject.toml -nt .venv/.installed ]; then
        .venv/bin/python -m pip install --quiet --upgrade pip
        .venv/bin/python -m pip install --quiet -e ".[dev]"
        touch .venv/.installed
    fi
}
