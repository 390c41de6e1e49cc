#!/usr/bin/env bash
# What the build's include roots cannot enforce (CMakeLists.txt, "one per layer"): only
# agent/probes (and the CLI that wires it) may include libbpf or the BPF skeletons, and no
# layer reaches around its include root with a relative path. Run by ctest (LayerRules).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
bad=$(grep -rnE '#include\s*[<"](bpf/(libbpf|bpf)\.h|[a-z_]+\.skel\.h)' agent --include='*.cpp' --include='*.hpp' \
      | grep -vE '^agent/(probes|cli)/' || true)
if [ -n "$bad" ]; then
  echo "check_layers: libbpf or a skeleton outside agent/probes:"; echo "$bad"; status=1
fi
rel=$(grep -rnE '#include\s*"\.\./' agent --include='*.cpp' --include='*.hpp' || true)
if [ -n "$rel" ]; then
  echo "check_layers: relative includes reach around a layer's include root:"; echo "$rel"; status=1
fi
[ $status -eq 0 ] && echo "check_layers: OK"
exit $status
