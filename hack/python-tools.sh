# The Python clients of the suites (pip, uv, twine, build and the hatchling backend), pinned in
# hack/python-tools.txt, in a venv. Sourced by hack/tools.sh and hack/kind-e2e.sh; defines
# install_python_tools VENV. The venv's stamp is the requirements' hash: a second run costs nothing.

install_python_tools() { # VENV
  local venv=$1 want
  want=$(sha256sum hack/python-tools.txt | cut -c1-16)
  if [ -x "$venv/bin/twine" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$want" ]; then return 0; fi
  printf '[tools] %s\n' "python venv: pip, uv, twine, build" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r hack/python-tools.txt
  echo "$want" > "$venv/.stamp"
}
