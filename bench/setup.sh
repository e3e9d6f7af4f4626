#!/usr/bin/env bash
# Installs the peers that bench/compare.sh measures sonde against, idempotently and
# non-interactively (safe to rerun; CI-like machines start without them).
# usage: bench/setup.sh
set -euo pipefail

# Debian packages: the peer tools plus GNU time (the shell builtin cannot report peak RSS),
# capinfos (in tshark's dependencies) for packet counts, tcpreplay for trace handling, and
# what the ground-truth generator needs for the scale trace (iproute2, tcpdump, ethtool).
APT_PKGS=(softflowd nfdump argus-server argus-client tcptrace tshark tcpreplay time gcc
          iproute2 tcpdump ethtool)

# NFStream: pinned to the version measured in docs/performance.md (the issue quotes 6.6),
# so that reruns compare against the same peer; override with NFSTREAM_SPEC=... to try another.
NFSTREAM_SPEC=${NFSTREAM_SPEC:-nfstream==6.6.0}

install_debian() {
    local missing=()
    for p in "${APT_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then
        echo "setup: Debian packages already installed"
        return
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark's postinst asks whether non-root users may capture; answer it up front.
    echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_nfstream() {
    if python3 -c 'import nfstream' 2>/dev/null; then
        echo "setup: nfstream $(python3 -c 'import nfstream; print(nfstream.__version__)') already importable"
        return
    fi
    echo "setup: pip install $NFSTREAM_SPEC"
    python3 -m pip install -q "$NFSTREAM_SPEC"
    python3 -c 'import nfstream; print("setup: nfstream", nfstream.__version__, "imports")'
}

main() {
    [[ $(id -u) == 0 ]] || { echo "setup: needs root (apt-get)" >&2; exit 1; }
    install_debian
    install_nfstream
}

main "$@"
