#!/usr/bin/env bash
# Regenerates the committed kubelet pod-resources v1 gRPC stubs (exporter/pods/podresources/api_pb2*.py) from
# exporter/pods/podresources/api.proto with the grpcio-tools of the project venv (a test extra). Run it after
# editing the proto or bumping grpcio-tools, then update the protobuf>= lower bound in pyproject.toml to the
# runtime version the new api_pb2.py checks (its ValidateProtobufRuntimeVersion line).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
pkg=exporter/pods/podresources
"$python" -m grpc_tools.protoc -I "$pkg" --python_out="$pkg" --grpc_python_out="$pkg" \
    "$pkg/api.proto"
# protoc emits `import api_pb2 as api__pb2`, which only works with the package dir on sys.path.
sed -i 's/^import api_pb2 as api__pb2$/from . import api_pb2 as api__pb2/' "$pkg/api_pb2_grpc.py"
grep -q '^from . import api_pb2 as api__pb2$' "$pkg/api_pb2_grpc.py"
grep -h 'ValidateProtobufRuntimeVersion\|GRPC_GENERATED_VERSION =' "$pkg"/api_pb2*.py -A 6 \
    | grep -E '^\s+[0-9]+,|GRPC_GENERATED_VERSION' >&2 || true
echo "regenerated $pkg/api_pb2.py, api_pb2_grpc.py" >&2
