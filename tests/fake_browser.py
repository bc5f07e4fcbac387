"""A browser for ``BROWSER=`` that approves a Google sign-in at once, as a user clicking "Allow" would.

``webbrowser`` runs the command and waits for it, while the login's loopback server answers only
after ``open`` returns: so the script forks, the parent exits at once and the child does what the
browser would. It opens the authorization URL (https, trusted through ``REQUESTS_CA_BUNDLE``),
takes the 302 to ``http://127.0.0.1:PORT/?code=...&state=...`` and follows it to the login's own
server. ``FAKE_BROWSER_LOG`` names a file where it writes what it saw (one line per step).

Usage: ``BROWSER="python tests/fake_browser.py %s"``.
"""

from __future__ import annotations

import os
import sys
import time


def visit(url: str, log_path: str | None) -> None:
    import requests

    def note(line: str) -> None:
        if log_path:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(line + "\n")

    approval = requests.get(url, allow_redirects=False, timeout=30)
    location = approval.headers.get("Location", "")
    note(f"authorize {approval.status_code} {location.split('?')[0]}")
    if approval.status_code != 302 or not location:
        return
    for _ in range(50):  # the loopback server is made before the browser opens; allow it a moment
        try:
            landing = requests.get(location, timeout=30)
            note(f"redirect {landing.status_code}")
            return
        except requests.ConnectionError:
            time.sleep(0.1)
    note("redirect unreachable")


def main() -> int:
    if os.fork():
        return 0  # the parent: webbrowser waits for this one
    try:
        visit(sys.argv[1], os.environ.get("FAKE_BROWSER_LOG"))
    finally:
        os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
