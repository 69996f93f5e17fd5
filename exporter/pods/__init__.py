"""Pod attribution: the kubelet pod-resources gRPC client and cache, /proc cgroups, and the pod families."""
