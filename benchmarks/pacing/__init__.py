"""Was ReBBR's BBR unpaced? The rebbr-pacing preset's result, regenerated from its committed tables."""
