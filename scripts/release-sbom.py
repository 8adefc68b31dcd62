#!/usr/bin/env python3
"""SPDX 2.3 (JSON) software bill of materials of the released image.

Usage: release-sbom.py --archive IMAGE.tar --version VERSION --image REF@sha256:... \
                       --librdkafka VERSION > sbom.spdx.json

scripts/release.sh writes it and attaches it to the pushed image as a signed attestation
(`cosign attest --type spdxjson`). What it lists, and where that comes from:
  - the image itself (a container package named by its digest);
  - outbox-operator VERSION, the binary (/usr/local/bin/outbox-operator);
  - librdkafka, built from source into the build stage (scripts/librdkafka.sh), whose
    version the caller passes: no package database records it;
  - every Debian package the image records in /var/lib/dpkg/status.d/ (one file per package
    a copied file came from, written by scripts/image-rootfs.sh where dpkg knew the files).
The image has no dpkg database of its own (it is FROM scratch), so those records are the
image's own statement of what it holds; this reads them from the docker-archive's layers
rather than from the machine that runs the release. No SBOM tool is built for this: the
records already carry what such a tool would find, and the test bed stays small.
Output is deterministic for the same inputs (SOURCE_DATE_EPOCH sets the creation time).
"""
import argparse
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import time

STATUS_DIR = "var/lib/dpkg/status.d/"


def layer_members(archive):
    """Yields (path, bytes) of the dpkg records and the binary, later layers winning."""
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))
        if len(manifest) != 1:
            sys.exit(f"release-sbom: {archive} holds {len(manifest)} images, want 1")
        found = {}
        for layer in manifest[0]["Layers"]:
            data = outer.extractfile(layer).read()
            # Layers of a docker-archive are plain tars, or gzip'd ones (tarfile reads both).
            with tarfile.open(fileobj=io.BytesIO(data)) as inner:
                for m in inner.getmembers():
                    name = m.name[2:] if m.name.startswith("./") else m.name
                    if not m.isfile():
                        continue
                    if name.startswith(STATUS_DIR) or name == "usr/local/bin/outbox-operator":
                        found[name] = inner.extractfile(m).read()
        return found


def parse_status(text):
    """One dpkg status paragraph as a dict (continuation lines dropped: none are used)."""
    fields = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
        if m:
            fields[m.group(1)] = m.group(2)
    return fields


def spdx_id(kind, name):
    return "SPDXRef-" + kind + "-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--archive", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--image", required=True, help="the pushed image, REPOSITORY@sha256:...")
    ap.add_argument("--librdkafka", required=True)
    a = ap.parse_args()
    repository, _, digest = a.image.rpartition("@")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest) or not repository:
        sys.exit(f"release-sbom: --image {a.image} is not REPOSITORY@sha256:<digest>")

    files = layer_members(a.archive)
    binary = files.get("usr/local/bin/outbox-operator")
    if binary is None:
        sys.exit(f"release-sbom: {a.archive} has no /usr/local/bin/outbox-operator")
    debs = []
    for name, data in sorted(files.items()):
        if name.startswith(STATUS_DIR):
            f = parse_status(data.decode("utf-8", "replace"))
            if f.get("Package") and f.get("Version"):
                debs.append(f)
    if not debs:
        sys.exit(f"release-sbom: {a.archive} records no Debian package in /{STATUS_DIR}")

    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or None))
    image_id = "SPDXRef-image"
    packages = [{
        "name": repository.rsplit("/", 1)[-1],
        "SPDXID": image_id,
        "versionInfo": digest,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "primaryPackagePurpose": "CONTAINER",
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": f"pkg:oci/{repository.rsplit('/', 1)[-1]}@{digest.replace(':', '%3A')}"
                                f"?repository_url={repository}&tag={a.version}",
        }],
    }, {
        "name": "outbox-operator",
        "SPDXID": spdx_id("Package", "outbox-operator"),
        "versionInfo": a.version,
        "supplier": "Organization: outbox-operator",
        "downloadLocation": f"https://github.com/outbox-operator/outbox-operator/releases/tag/v{a.version}",
        "filesAnalyzed": False,
        "licenseConcluded": "Apache-2.0",
        "licenseDeclared": "Apache-2.0",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "APPLICATION",
        "checksums": [{"algorithm": "SHA256", "checksumValue": hashlib.sha256(binary).hexdigest()}],
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": f"pkg:github/outbox-operator/outbox-operator@v{a.version}",
        }],
    }, {
        "name": "librdkafka",
        "SPDXID": spdx_id("Package", "librdkafka"),
        "versionInfo": a.librdkafka,
        "supplier": "Organization: Confluent Inc.",
        "downloadLocation": "https://github.com/confluentinc/librdkafka",
        "filesAnalyzed": False,
        "licenseDeclared": "BSD-2-Clause",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "LIBRARY",
        "comment": "Built from Debian trixie's source package by scripts/librdkafka.sh.",
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": f"pkg:github/confluentinc/librdkafka@v{a.librdkafka}",
        }],
    }]
    for f in debs:
        arch = f.get("Architecture", "")
        purl = f"pkg:deb/debian/{f['Package']}@{f['Version'].replace(':', '%3A')}"
        qualifiers = [q for q in (f"arch={arch}" if arch else "", "distro=debian-12") if q]
        source = f.get("Source", "").split(" ")[0]
        if source and source != f["Package"]:
            qualifiers.append(f"upstream={source}")
        packages.append({
            "name": f["Package"],
            "SPDXID": spdx_id("Package-deb", f["Package"]),
            "versionInfo": f["Version"],
            "supplier": "Organization: Debian",
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "copyrightText": "NOASSERTION",
            "primaryPackagePurpose": "LIBRARY",
            "externalRefs": [{
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": purl + "?" + "&".join(qualifiers),
            }],
        })
    relationships = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                      "relatedSpdxElement": image_id}]
    relationships += [{"spdxElementId": image_id, "relationshipType": "CONTAINS",
                       "relatedSpdxElement": p["SPDXID"]} for p in packages[1:]]
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"outbox-operator-{a.version}-image",
        "documentNamespace": f"https://github.com/outbox-operator/outbox-operator/spdx/{a.version}/{digest}",
        "creationInfo": {"created": created, "creators": ["Tool: outbox-operator scripts/release-sbom.py"]},
        "documentDescribes": [image_id],
        "packages": packages,
        "relationships": relationships,
    }
    json.dump(doc, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
