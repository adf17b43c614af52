"""Exit statuses that mean something beyond failure, shared by `ccsweep` and the flow endpoints.

A cell's status decides what runs it next: Argo retries only infrastructure failures (see
workflows/templates/ccsweep-cell.yaml) and the local executor reports a missing algorithm as
"unavailable", not "failed". Stdlib only and tiny, because every cell process and every flow
endpoint imports it at start-up.
"""

#: Bad input (a spec, an option, a cell): nothing was run and nothing stored was touched.
EXIT_USAGE = 2
#: The kernel cannot give a socket the cell's congestion control: no retry can help.
EXIT_UNAVAILABLE = 3
#: Run it again (EX_TEMPFAIL): measured while the emulator ran late or starved by the machine (the
#: attempt is kept, not counted), the store was unreachable, or the result could only be kept on
#: this machine. Unlike
#: a failure or bad input, another try may succeed: the code a retry strategy retries on.
EXIT_RETRY = 75
#: Stopped by SIGINT or SIGTERM (128 + SIGINT, as a shell reports Ctrl-C).
EXIT_INTERRUPTED = 130
