#!/usr/bin/env bash
# Prints the path of KEDA's ScaledObject CustomResourceDefinition (keda.sh/v1alpha1), taken
# from KEDA's Go module as the Go module proxy serves it (the zip's SHA-256 is pinned), and
# cached under $TESTBED_CACHE/keda-$KEDA_VERSION. Only the CRD is used: the test bed does not
# run KEDA's operator (see examples/keda/README.md for why and what is tested instead).
# Idempotent: returns at once when the file is there.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
KEDA_VERSION=v2.21.1
KEDA_ZIP_SHA256=872fa4b9d4282969ece753727ca31a7a31eaf341a52fa0972148297521ca9a75
dest="$TESTBED_CACHE/keda-$KEDA_VERSION"
crd="$dest/keda.sh_scaledobjects.yaml"
if [ -s "$crd" ]; then echo "$crd"; exit 0; fi

mkdir -p "$dest"
exec 9>"$dest/.lock"
flock 9
if [ -s "$crd" ]; then echo "$crd"; exit 0; fi
proxy=${GOPROXY:-https://proxy.golang.org}
proxy=${proxy%%,*}
url="$proxy/github.com/kedacore/keda/v2/@v/$KEDA_VERSION.zip"
log "fetching KEDA $KEDA_VERSION's module zip from $proxy (for its ScaledObject CRD)"
curl -fsSL --retry 3 -o "$dest/keda.zip" "$url" || die "downloading $url failed"
echo "$KEDA_ZIP_SHA256  $dest/keda.zip" | sha256sum -c --quiet - ||
  die "$url does not have the pinned SHA-256"
python3 - "$dest/keda.zip" "$crd.tmp" "$KEDA_VERSION" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read(f"github.com/kedacore/keda/v2@{sys.argv[3]}/config/crd/bases/keda.sh_scaledobjects.yaml")
open(sys.argv[2], "wb").write(data)
PY
mv "$crd.tmp" "$crd"
rm -f "$dest/keda.zip"
echo "$crd"
