"""Open every page of a built site in headless Chromium, as a reader would, and say what is wrong.

    python -m textglauber.bookbuild.sitecheck _build/smoke/_build/html            # check, screenshots beside the site

A page fails on: a table, figure or output wider than the content column without its own
horizontally scrolling box (so the page clips it or scrolls sideways), an image that does not
load, any request to the network, a JavaScript error, math left as raw TeX, and a path of the
build machine in the text. Each page is opened at a desktop width (1280 px) and a phone width
(390 px), and a full-page screenshot of each is saved under ``screenshots/<width>/`` next to the
site folder.

The browser is driven through the Chrome DevTools protocol over a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so no Python package beyond the
standard library is needed; only the ``chromium`` program (Debian's ``chromium`` package).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WIDTHS = (1280, 390)
SKIP_DIRS = {"_static", "_sources", "_images", "_downloads"}
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:", "chrome:", "devtools:")


def find_chromium() -> str | None:
    """The Chromium program, or None: $CHROMIUM, then the usual names on PATH."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """One headless Chromium, spoken to over the DevTools pipe."""

    def __init__(self, program: str | None = None, timeout: float = 60.0):
        program = program or find_chromium()
        if not program:
            raise FileNotFoundError("no chromium program found (install Debian's `chromium` package)")
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="sitecheck-")
        to_child_r, self._to_child = os.pipe()          # we write commands, the browser reads fd 3
        self._from_child, from_child_w = os.pipe()      # the browser writes fd 4, we read

        def wire():                                    # runs in the child before exec
            import fcntl                               # move both ends clear of 3 and 4 first: a pipe
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]   # may be on 3 or 4
            os.dup2(high[0], 3)                        # dup2 leaves the copies open across exec
            os.dup2(high[1], 4)

        args = [program, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--disable-default-apps", "--mute-audio",
                "--disable-dev-shm-usage", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self._events: queue.Queue = queue.Queue()
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._replies[-1] = {"error": {"message": "the browser closed its pipe"}}
                    self._cond.notify_all()
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for raw in messages:
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self._events.put(msg)

    def call(self, method: str, session: str | None = None, timeout: float | None = None, **params) -> dict:
        self._next_id += 1
        mid = self._next_id
        msg = {"id": mid, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while mid not in self._replies and -1 not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{method}: no answer from the browser in {timeout or self.timeout:.0f} s")
                self._cond.wait(left)
            reply = self._replies.pop(mid, None) or self._replies[-1]
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def events(self, session: str) -> list[dict]:
        """The events of ``session`` received so far (others are dropped)."""
        out = []
        while True:
            try:
                e = self._events.get_nowait()
            except queue.Empty:
                return out
            if e.get("sessionId") == session:
                out.append(e)

    def wait_for(self, session: str, method: str, timeout: float, seen: list[dict]) -> bool:
        """Collect ``session``'s events into ``seen`` until one named ``method`` arrives."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                e = self._events.get(timeout=0.1)
            except queue.Empty:
                continue
            if e.get("sessionId") == session:
                seen.append(e)
                if e.get("method") == method:
                    return True
        return False

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Waits for what a reader waits for: images decoded and MathJax's first typesetting done.
SETTLE_JS = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  for (const img of document.images) { if (img.loading === 'lazy') img.loading = 'eager'; }
  const pending = [...document.images].filter(i => !i.complete)
      .map(i => new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); }));
  await Promise.race([Promise.all(pending), sleep(15000)]);
  if ([...document.scripts].some(s => /mathjax/i.test(s.src))) {
    for (let k = 0; k < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); k++) await sleep(50);
    if (window.MathJax && MathJax.startup && MathJax.startup.promise)
      await Promise.race([MathJax.startup.promise, sleep(30000)]);
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return true;
})()
"""

# What a reader would see wrong: returns {clipped, broken_images, raw_tex, math_errors, paths, sideways}.
INSPECT_JS = r"""
((machinePaths) => {
  const content = document.querySelector('article.bd-article') || document.querySelector('article')
      || document.querySelector('main') || document.body;
  const cr = content.getBoundingClientRect();
  const fits = r => r.left >= cr.left - 1 && r.right <= cr.right + 1;
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
      + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).slice(0, 2).join('.') : '');
  const near = el => { const h = el.closest('section'); const t = h && h.querySelector('h1, h2, h3');
      return t ? ' (section "' + t.textContent.replace(/[#¶]/g, '').trim().slice(0, 60) + '")' : ''; };
  const clipped = [];
  const wide = 'table, img, pre, svg, canvas, iframe, video, mjx-container, .cell_output, .output';
  for (const el of content.querySelectorAll(wide)) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;                       // hidden (folded code, closed toggles)
    let boxed = false, cut = false;
    for (let a = el.parentElement; a && a !== content; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'auto' || ox === 'scroll') { boxed = fits(a.getBoundingClientRect()); break; }
      if ((ox === 'hidden' || ox === 'clip') && a.clientWidth < r.width - 1) { cut = true; break; }
    }
    if (cut || (!boxed && !fits(r))) {
      if (clipped.some(c => c.el.contains(el))) continue;                // report the outermost only
      clipped.push({el, text: name(el) + ' is ' + Math.round(r.width) + ' px wide in a ' + Math.round(cr.width)
                    + ' px column' + (cut ? ', cut by a container that hides overflow' : ' with no scroll box of its own') + near(el)});
    }
  }
  const unpadded = [], midword = [], shrunk = [];
  for (const t of content.querySelectorAll('table')) {
    if (t.getBoundingClientRect().width === 0) continue;
    const cells = [...t.querySelectorAll('td, th')];
    const tight = cells.some(c => c.textContent.trim() && c.nextElementSibling && c.nextElementSibling.textContent.trim()
        && parseFloat(getComputedStyle(c).paddingRight) + parseFloat(getComputedStyle(c.nextElementSibling).paddingLeft) < 4);
    if (tight) unpadded.push(name(t) + near(t));
    for (const c of cells) {
      const text = c.textContent.trim();
      if (text.length < 2 || /\s/.test(text)) continue;
      const tops = new Set();                            // the line boxes of the cell's text
      const texts = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
      for (let n = texts.nextNode(); n; n = texts.nextNode()) {
        const range = document.createRange();
        range.selectNodeContents(n);
        for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
      }
      if (tops.size > 1) midword.push('"' + text.slice(0, 40) + '"' + near(c));
    }
  }
  if (window.innerWidth >= 1000)
    for (const i of content.querySelectorAll('img')) {
      const w = i.getBoundingClientRect().width;
      if (i.naturalWidth > 200 && w > 0 && w < 0.9 * i.naturalWidth)
        shrunk.push((i.getAttribute('src') || '').split('/').pop().slice(0, 24) + ' at ' + Math.round(100 * w / i.naturalWidth)
                    + '% of its ' + i.naturalWidth + ' px' + near(i));
    }
  const broken = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
      .map(i => i.getAttribute('src'));
  const tex = [], paths = [];
  const texRe = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\\(?:frac|mathrm|mathbf|mathcal|sum|log|alpha|pi|mid|le|ge|ne|cdot|infty|operatorname|text)\b|\$[^$\s][^$\n]{0,200}?\$/;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const p = t.parentElement;
    if (!p || p.closest('script, style, noscript, textarea, mjx-container, mjx-assistive-mml')) continue;
    const s = t.textContent;
    for (const mp of machinePaths) if (mp && s.includes(mp)) paths.push(s.trim().slice(0, 120));
    if (p.closest('pre, code, .highlight, .cell_input')) continue;
    const m = s.match(texRe);
    if (m) tex.push(s.trim().slice(Math.max(0, m.index - 30), m.index + 60));
  }
  const mathErrors = [...document.querySelectorAll('mjx-merror, .MathJax_Error')].map(e => e.textContent.slice(0, 80));
  const doc = document.scrollingElement || document.documentElement;
  return {clipped: clipped.map(c => c.text), unpadded, midword: [...new Set(midword)], shrunk, broken_images: broken, raw_tex: tex, math_errors: mathErrors,
          paths: [...new Set(paths)], sideways: doc.scrollWidth > window.innerWidth + 1 ? doc.scrollWidth : 0};
})
"""


def pages(html_dir: Path) -> list[Path]:
    """Every HTML page of the site (theme assets and sources left out)."""
    return sorted(p for p in Path(html_dir).rglob("*.html")
                  if not SKIP_DIRS & set(p.relative_to(html_dir).parts[:-1]))


def redirect_target(page: Path) -> Path | None:
    """The page a redirect-only page (``<meta http-equiv="refresh" content="0; url=...">``) sends
    the reader to, or None for a real page."""
    m = re.search(r"""<meta[^>]+http-equiv=["']?refresh["']?[^>]*content=["'][^"']*url=([^"'>\s]+)""",
                  page.read_text(errors="ignore")[:4000], re.I)
    return (page.parent / m.group(1).split("#")[0]).resolve() if m else None


def _event_problems(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if not url.startswith(LOCAL_SCHEMES):
                out.append(f"network request: {url[:160]}")
        elif m == "Network.loadingFailed" and not p.get("canceled"):
            out.append(f"a resource did not load ({p.get('errorText')}, {p.get('type')})")
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "")
            out.append(f"JavaScript error: {text.splitlines()[0][:200] if text else 'exception'} "
                       f"({d.get('url', '')}:{d.get('lineNumber', '')})")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"JavaScript console error: {args[:200]}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"browser error ({entry.get('source')}): {entry.get('text', '')[:200]} {entry.get('url', '')[:120]}")
    return list(dict.fromkeys(out))


def full_page_png(browser: Browser, session: str, width: int, height: int, limit: int = 32000) -> bytes:
    """The whole page as a PNG: the window is made as tall as the page for the shot (capturing
    beyond a short window lays the theme's sticky columns out wrongly), then put back."""
    tall = int(min(browser.call("Page.getLayoutMetrics", session)["cssContentSize"]["height"], limit))
    browser.call("Emulation.setDeviceMetricsOverride", session, width=width, height=max(tall, height),
                 deviceScaleFactor=1, mobile=width < 700)
    browser.call("Runtime.evaluate", session, awaitPromise=True,
                 expression="new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    shot = browser.call("Page.captureScreenshot", session, timeout=120, format="png")
    browser.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                 mobile=width < 700)
    return base64.b64decode(shot["data"])


def check_page(browser: Browser, page: Path, width: int, screenshot: Path | None,
               machine_paths: tuple[str, ...] = (), height: int = 900) -> list[str]:
    """The problems a reader would meet on ``page`` at ``width`` px; saves a full-page screenshot."""
    target = browser.call("Target.createTarget", url="about:blank")["targetId"]
    session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    seen: list[dict] = []
    try:
        for domain in ("Page", "Runtime", "Network", "Log"):
            browser.call(f"{domain}.enable", session)
        browser.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height,
                     deviceScaleFactor=1, mobile=width < 700)
        browser.call("Page.navigate", session, url=page.resolve().as_uri())
        if not browser.wait_for(session, "Page.loadEventFired", browser.timeout, seen):
            return [f"the page did not finish loading in {browser.timeout:.0f} s"]
        browser.call("Runtime.evaluate", session, expression=SETTLE_JS, awaitPromise=True, timeout=90)
        found = browser.call("Runtime.evaluate", session, returnByValue=True,
                             expression=f"({INSPECT_JS})({json.dumps([p for p in machine_paths if p])})")
        r = found.get("result", {}).get("value") or {}
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(full_page_png(browser, session, width, height))
        time.sleep(0.2)
        seen += browser.events(session)
    finally:
        browser.call("Target.closeTarget", targetId=target)
    problems = [f"too wide: {c}" for c in r.get("clipped", [])]
    problems += [f"table cells without padding (neighbouring values run together): {t}" for t in r.get("unpadded", [])]
    problems += [f"a table cell breaks inside a word: {t}" for t in r.get("midword", [])[:5]]
    problems += [f"figure shrunk to fit (its text shrinks with it): {t}" for t in r.get("shrunk", [])]
    if r.get("sideways"):
        problems.append(f"the page scrolls sideways ({r['sideways']} px of content in a {width} px window)")
    problems += [f"image did not load: {src}" for src in r.get("broken_images", [])]
    problems += [f"raw TeX: ...{t}..." for t in r.get("raw_tex", [])[:5]]
    problems += [f"MathJax error: {t}" for t in r.get("math_errors", [])[:5]]
    problems += [f"a path of the build machine: {t}" for t in r.get("paths", [])[:5]]
    return problems + _event_problems(seen)


def check_site(html_dir: str | Path, shots_dir: str | Path | None = None, widths=WIDTHS,
               machine_paths: tuple[str, ...] | None = None, program: str | None = None) -> list[str]:
    """Every page of the site at every width: a list of 'page @ width: problem' lines (empty
    when the site is fine). Screenshots go to ``shots_dir/<width>/<page>.png`` (default: a
    ``screenshots`` folder beside ``html_dir``)."""
    html_dir = Path(html_dir)
    shots = Path(shots_dir) if shots_dir else html_dir.parent / "screenshots"
    if machine_paths is None:
        from ..paths import repo_root
        machine_paths = (str(repo_root()), str(Path.home()) + "/")
    found = pages(html_dir)
    if not found:
        return [f"{html_dir}: no HTML page to check"]
    problems = []
    with Browser(program) as browser:
        for page in found:
            rel = page.relative_to(html_dir)
            target = redirect_target(page)
            if target is not None:                 # a redirect (the site's index.html): its target is checked
                if not target.exists():
                    problems.append(f"{rel}: redirects to {target.name}, which does not exist")
                continue
            for w in widths:
                shot = shots / str(w) / rel.with_suffix(".png")
                problems += [f"{rel} @ {w}px: {p}" for p in check_page(browser, page, w, shot, machine_paths)]
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m textglauber.bookbuild.sitecheck", description=__doc__.split("\n")[0])
    ap.add_argument("html", help="the built site's folder (…/_build/html)")
    ap.add_argument("--screenshots", default=None, help="where screenshots go (default: beside the site folder)")
    a = ap.parse_args(argv)
    problems = check_site(a.html, a.screenshots)
    for p in problems:
        print(p)
    shots = a.screenshots or Path(a.html).parent / "screenshots"
    print(f"{len(pages(Path(a.html)))} pages checked at {', '.join(map(str, WIDTHS))} px; "
          f"{len(problems)} problems; screenshots in {shots}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
