#!/usr/bin/python3
"""Decodes OTLP/HTTP JSON bodies with the OTLP protobuf definitions (tests/integration/otlp, from
opentelemetry-proto v1.9.0) and checks what the specification requires beyond the schema.

Usage: otlp_decode.py PROTO_DIR metrics:FILE|traces:FILE ...
Prints one JSON summary line; exits 1 when a body does not decode or breaks a rule.

The OTLP JSON mapping is protobuf's JSON mapping except for trace and span ids, which are hex
strings, not base64 (OTLP specification, "JSON Protobuf Encoding"): they are turned into
base64 before protobuf's own parser (json_format.Parse, unknown fields rejected) reads the body.
"""
import base64
import binascii
import json
import os
import subprocess
import sys
import tempfile

ID_KEYS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}


def hex_ids_to_base64(node, errors):
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if key in ID_KEYS and isinstance(value, str):
                if value == "" and key == "parentSpanId":
                    continue
                try:
                    raw = binascii.unhexlify(value)
                except (binascii.Error, ValueError):
                    errors.append(f"{key} {value!r} is not hex")
                    continue
                if len(raw) != ID_KEYS[key] or raw == b"\0" * len(raw):
                    errors.append(f"{key} {value!r}: {len(raw)} bytes or all zero")
                node[key] = base64.b64encode(raw).decode()
            else:
                hex_ids_to_base64(value, errors)
    elif isinstance(node, list):
        for value in node:
            hex_ids_to_base64(value, errors)


def main():
    proto_dir = sys.argv[1]
    out = tempfile.mkdtemp(prefix="ld-otlp-")
    protos = [
        "opentelemetry/proto/common/v1/common.proto",
        "opentelemetry/proto/resource/v1/resource.proto",
        "opentelemetry/proto/trace/v1/trace.proto",
        "opentelemetry/proto/metrics/v1/metrics.proto",
        "opentelemetry/proto/collector/trace/v1/trace_service.proto",
        "opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
    ]
    subprocess.run(["protoc", f"-I{proto_dir}", f"--python_out={out}"] + protos, check=True)
    sys.path.insert(0, out)
    from google.protobuf import json_format
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    summary = {"spans": 0, "span_names": {}, "metrics": [], "metric_requests": 0, "trace_requests": 0,
               "errors": []}
    errors = summary["errors"]
    for arg in sys.argv[2:]:
        kind, path = arg.split(":", 1)
        with open(path) as f:
            body = json.load(f)
        hex_ids_to_base64(body, errors)
        if kind == "traces":
            msg = trace_service_pb2.ExportTraceServiceRequest()
            json_format.Parse(json.dumps(body), msg, ignore_unknown_fields=False)
            summary["trace_requests"] += 1
            for rs in msg.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        summary["spans"] += 1
                        summary["span_names"][span.name] = summary["span_names"].get(span.name, 0) + 1
                        if len(span.trace_id) != 16 or len(span.span_id) != 8:
                            errors.append(f"span {span.name}: id lengths {len(span.trace_id)}/{len(span.span_id)}")
                        if span.start_time_unix_nano == 0 or span.end_time_unix_nano < span.start_time_unix_nano:
                            errors.append(f"span {span.name}: times {span.start_time_unix_nano}..{span.end_time_unix_nano}")
                        if span.kind == 0:
                            errors.append(f"span {span.name}: SPAN_KIND_UNSPECIFIED")
        else:
            msg = metrics_service_pb2.ExportMetricsServiceRequest()
            json_format.Parse(json.dumps(body), msg, ignore_unknown_fields=False)
            summary["metric_requests"] += 1
            for rm in msg.resource_metrics:
                if not any(a.key == "service.name" for a in rm.resource.attributes):
                    errors.append("resource without service.name")
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if m.name not in summary["metrics"]:
                            summary["metrics"].append(m.name)
                        which = m.WhichOneof("data")
                        if which is None:
                            errors.append(f"metric {m.name}: no data")
                        if which == "histogram":
                            for p in m.histogram.data_points:
                                if len(p.bucket_counts) != len(p.explicit_bounds) + 1:
                                    errors.append(f"{m.name}: {len(p.bucket_counts)} counts, {len(p.explicit_bounds)} bounds")
                                if sum(p.bucket_counts) != p.count:
                                    errors.append(f"{m.name}: bucket counts sum {sum(p.bucket_counts)} != count {p.count}")
                                if list(p.explicit_bounds) != sorted(p.explicit_bounds):
                                    errors.append(f"{m.name}: bounds not increasing")
                        if which == "sum" and m.sum.aggregation_temporality == 0:
                            errors.append(f"{m.name}: temporality unspecified")
    print(json.dumps(summary))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
