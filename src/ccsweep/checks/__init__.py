"""Claim checks: published claims tested against the stored cells they apply to, pass or fail per claim.

`claims` holds what every check is built of (a claim, its scope as data, a verdict judged across
the interval of each median, the helpers that walk an experiment's points) and the papers'
claims; `source_claims` the claims the other sources make of their own numbers, built from
`claims`' public names alone. Apart from `figures` because a check reads results and draws
nothing: the report shows the rows, and a test or a bench can judge a sweep without matplotlib.
"""
