#!/usr/bin/env bash
# wheel_smoke.sh WHEEL: install WHEEL into fresh virtual environments of clean interpreters
# (Debian's python3, not the one that built it; also CPython 3.13 where pyenv has one, for abi3)
# whose PATH has no cargo or rustc (no ~/.cargo/bin) and HOME is elsewhere, then run the README's
# first command (the main job: compact the bundled example offline, print the context) from it.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(realpath "$1")
version=$(python3 -c "import tomllib; print(tomllib.load(open('Cargo.toml', 'rb'))['package']['version'])")
clean=$(mktemp -d)
trap 'rm -rf "$clean"' EXIT
pythons=(/usr/bin/python3)
for p in /root/.pyenv/versions/3.13*/bin/python3; do [ -x "$p" ] && pythons+=("$p") && break; done
# the few tools the job below runs, linked into a folder of their own: /usr/bin may hold a Rust
# toolchain (CI installs Debian's rustc to rebuild the HTML view's matcher), so it is not on PATH
mkdir -p "$clean/bin"
for tool in bash cp grep; do ln -s "$(command -v "$tool")" "$clean/bin/$tool"; done
for py in "${pythons[@]}"; do
    rm -rf "$clean/venv" "$clean/home" && mkdir -p "$clean/home"
    "$py" -m venv "$clean/venv"
    env -u CARGO_HOME -u RUSTUP_HOME -u VIRTUAL_ENV -u PYTHONPATH HOME="$clean/home" PATH="$clean/venv/bin:$clean/bin" \
        WHEEL="$wheel" EXAMPLE="$PWD/examples/session.jsonl" VERSION="$version" bash -euo pipefail -c '
        cd "$HOME"
        if command -v cargo || command -v rustc; then echo "a Rust toolchain is on PATH" >&2; exit 1; fi
        pip install -q --only-binary :all: "$WHEEL"
        python -c "import sessiontree, sys; assert sessiontree.__file__.startswith(sys.prefix), sessiontree.__file__; print(\"Python\", sys.version.split()[0], sessiontree.__file__)"
        [ "$(sessiontree --version)" = "sessiontree $VERSION" ]
        # --- README: first command, from the wheel (keep in sync) ---
        cp "$EXAMPLE" demo.jsonl && sessiontree compact demo.jsonl --keep-recent-tokens 2000 && sessiontree context demo.jsonl
        # ---
        grep -q "\"type\":\"compaction\"" demo.jsonl
    '
done
echo "$(basename "$wheel"): installed without a Rust toolchain and ran the main job on ${pythons[*]}"
