"""The Kubernetes side: the scale subresource of any target read and patched (`scale`), every API answer
validated (`answers`), kinds resolved through API discovery (`discovery`), and the leader Lease (`leader`).
Uses the official client; knows nothing of rules beyond a target reference."""
