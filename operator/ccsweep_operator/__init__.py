"""The Sweep operator: a Sweep object becomes a planned sweep and one Argo Workflow.

`reconcile` decides (plain functions, tested without a cluster), `kube` talks to the API server,
`handlers` wires both to kopf, `nodeprobe` labels nodes with their congestion controls.
"""
