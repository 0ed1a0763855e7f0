import sys

from backends.interrupts import describe, exit_status, quiet_when_stdout_closes, stop_on_signals

with quiet_when_stdout_closes(), stop_on_signals():
    try:
        from gpt2.cli import main
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or SIGHUP while torch imports
        print(f"\npython -m gpt2: {describe(stop)} while starting; nothing was done", file=sys.stderr)
        sys.exit(exit_status(stop))
    sys.exit(main())
