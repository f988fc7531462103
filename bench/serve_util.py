"""serve_util.py — what the serve benchmarks share: stopping a server process they started."""
import signal
import subprocess


def stop_server(proc):
    """SIGTERM (in-flight streams end cleanly), then SIGKILL if it is not gone within 60 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
