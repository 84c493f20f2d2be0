#!/usr/bin/env python3
"""Builds long, Claude Code-shaped agent sessions from this repository's own files.

Everything comes from `git` at one fixed commit (--commit; the files of `git ls-files` there, read
with `git show`, and diffs of the commits before it), so the output depends only on the commit and
--seed, never on the working tree. Two files are written:

  --session FILE   {"cases": [{"name", "request": <Anthropic Messages request>}]}: one request per
                   conversation, for `keel eval record`, which answers each through the serving path
                   and writes the transcripts `keel eval fidelity` replays.
  --suite FILE     a `keel eval tools` suite: per conversation, cases that cut the session at a
                   point and ask for a call whose argument is a value seen thousands of tokens back
                   in a tool result (a path from a grep or glob, a function name from a file).

A session: a system prompt (agent instructions plus project notes from DESIGN.md or docs), the six
coding tools (Bash, Read, Edit, Write, Glob, Grep), then turns of a coding task: the user asks,
the assistant calls a tool, the tool result holds real file contents (`cat -n` form, as Claude
Code's Read returns them), directory listings, grep output, glob matches or diffs, with user
follow-ups in between. Sizes are planned in characters; tiny-toolcaller's tokenizer averages about
1.75 characters per token on this text, so --tokens is converted at that rate.
"""
import argparse
import fnmatch
import json
import random
import re
import subprocess
import sys

CHARS_PER_TOKEN = 1.75
ROOT = "/home/dev/keel"

SYSTEM_INSTRUCTIONS = """You are an interactive coding agent working in the user's repository. Use the tools to read, \
search and change files, and to run commands; answer with a tool call whenever a tool can do the next step. \
Read a file before you edit it. Prefer Grep and Glob over Bash for searching. Keep edits minimal and in \
the style of the surrounding code. When a command fails, read its output before trying again.

Environment:
- Working directory: """ + ROOT + """
- Platform: linux
- The repository is a git repository; the build directory is build/ (ninja).

The project notes below come from the repository (its design document); follow them."""

TOOLS = [
    {"name": "Bash", "description": "Execute a bash command and return output.",
     "input_schema": {"type": "object", "properties": {
         "command": {"type": "string", "description": "The bash command to execute"},
         "description": {"type": "string", "description": "Description of what this command does"}},
         "required": ["command"]}},
    {"name": "Read", "description": "Read a file from the filesystem.",
     "input_schema": {"type": "object", "properties": {
         "file_path": {"type": "string", "description": "Absolute path to the file"}},
         "required": ["file_path"]}},
    {"name": "Edit", "description": "Edit a file by replacing text.",
     "input_schema": {"type": "object", "properties": {
         "file_path": {"type": "string", "description": "Absolute path to the file"},
         "old_string": {"type": "string", "description": "Text to find"},
         "new_string": {"type": "string", "description": "Replacement text"}},
         "required": ["file_path", "old_string", "new_string"]}},
    {"name": "Write", "description": "Write content to a file.",
     "input_schema": {"type": "object", "properties": {
         "file_path": {"type": "string", "description": "Absolute path to the file"},
         "content": {"type": "string", "description": "Content to write"}},
         "required": ["file_path", "content"]}},
    {"name": "Glob", "description": "Find files matching a glob pattern.",
     "input_schema": {"type": "object", "properties": {
         "pattern": {"type": "string", "description": "Glob pattern"}},
         "required": ["pattern"]}},
    {"name": "Grep", "description": "Search file contents with regex.",
     "input_schema": {"type": "object", "properties": {
         "pattern": {"type": "string", "description": "Regex pattern to search"},
         "path": {"type": "string", "description": "Path to search in"}},
         "required": ["pattern"]}},
]

# The modules a session works in, and the task the user opens it with.
TASKS = [
    ("src/keel/kv", "The KV pool's byte accounting looks off after a trim. Find where bytes are counted and check it."),
    ("src/keel/eval", "Add a per-distance breakdown to the fidelity report. Start by reading how the report is built."),
    ("src/keel/chat", "A template renders tool results with the wrong role. Track down where role spans are assigned."),
    ("src/keel/toolcall", "Bare JSON tool calls are sometimes missed. Look at the parsers and find the fallback."),
    ("src/keel/api", "The Anthropic endpoint returns 500 on an empty tools array. Find the request conversion."),
    ("src/keel/engine", "Retries after an invalid call seem to duplicate context. Find where retries rewind the cache."),
    ("src/keel/text", "Decoding splits a multi-byte character across two events. Find the streaming decoder."),
    ("src/keel/plan", "keel plan disagrees with the pool for sliding layers. Compare the planner's KV bytes with the pool's."),
    ("src/keel/util", "JSON helpers accept duplicate keys silently. Find the parser wrapper and its tests."),
    ("tests", "A prefix-cache test is flaky on one machine. Find the reuse tests and what they compare."),
]

FOLLOW_UPS = [
    "Good. Keep going, but look at the tests too.",
    "What calls this? Search for the callers.",
    "Check the header as well before changing anything.",
    "Now look at how the docs describe it.",
    "Show me the recent history of this file.",
    "That is the wrong place, I think. Look one level up.",
    "Fine. Now find every place that uses the same constant.",
    "Before editing, list the folder so we know what else is there.",
]


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


class Repo:
    def __init__(self, path, commit):
        self.path, self.commit = path, commit
        self.files = [f for f in git(path, "ls-tree", "-r", "--name-only", commit).decode().splitlines()]
        sizes = git(path, "ls-tree", "-r", "-l", commit).decode().splitlines()
        self.size = {}
        for line in sizes:
            meta, name = line.split("\t", 1)
            self.size[name] = int(meta.split()[3]) if meta.split()[3] != "-" else 0
        self.text_files = [f for f in self.files if re.search(r"\.(cpp|h|md|py|sh|txt|cmake)$|CMakeLists", f)]
        self._cache = {}
        self.history = git(path, "log", "--format=%H", "-n", "60", commit).decode().split()

    def read(self, name):
        if name not in self._cache:
            self._cache[name] = git(self.path, "show", f"{self.commit}:{name}").decode("utf-8", "replace")
        return self._cache[name]

    def grep(self, pattern, under):
        rx = re.compile(pattern)
        out = []
        for f in self.text_files:
            if not f.startswith(under):
                continue
            for i, line in enumerate(self.read(f).splitlines(), 1):
                if rx.search(line):
                    out.append((f, i, line))
        return out

    def diff(self, sha, under):
        paths = ["--", under] if under else []
        text = git(self.path, "show", "--format=commit %H%nAuthor: keel developers%n%n    %s%n", sha, *paths).decode(
            "utf-8", "replace")
        return text


def cat_n(text, first=1, limit=None):
    lines = text.splitlines()
    if limit is not None:
        lines = lines[first - 1:first - 1 + limit]
    else:
        lines = lines[first - 1:]
    return "\n".join(f"{first + i:6d}\t{l}" for i, l in enumerate(lines))


def ls_la(repo, folder):
    entries = {}
    for f in repo.files:
        if not f.startswith(folder + "/"):
            continue
        rest = f[len(folder) + 1:]
        head = rest.split("/", 1)[0]
        entries[head] = entries.get(head, 0) + (repo.size.get(f, 0) if "/" not in rest else 0)
        if "/" in rest:
            entries[head] = -1
    lines = [f"total {len(entries) * 8}", "drwxr-xr-x  4 dev dev     4096 Dec  1 09:12 .",
             "drwxr-xr-x 12 dev dev     4096 Dec  1 09:12 .."]
    for name in sorted(entries):
        if entries[name] < 0:
            lines.append(f"drwxr-xr-x  2 dev dev     4096 Dec  1 09:12 {name}")
        else:
            lines.append(f"-rw-r--r--  1 dev dev {entries[name]:8d} Dec  1 09:12 {name}")
    return "\n".join(lines)


class Session:
    """One conversation, built turn by turn with a running character count."""

    def __init__(self, rng, repo, name, target_chars):
        self.rng, self.repo, self.name, self.target = rng, repo, name, target_chars
        self.messages = []
        self.chars = 0
        self.calls = 0
        self.facts = []  # (kind, value, where): values a later question can depend on

    def add(self, message, text_len):
        self.messages.append(message)
        self.chars += text_len + 40

    def user(self, text):
        self.add({"role": "user", "content": text}, len(text))

    def call(self, tool, args, result, preamble=""):
        call_id = f"toolu_{self.name}_{self.calls:02d}"
        self.calls += 1
        content = []
        if preamble:
            content.append({"type": "text", "text": preamble})
        content.append({"type": "tool_use", "id": call_id, "name": tool, "input": args})
        self.add({"role": "assistant", "content": content}, len(json.dumps(args)) + len(preamble))
        self.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}]},
                 len(result))

    def messages_so_far(self):
        return [json.loads(json.dumps(m)) for m in self.messages]


def pick_pattern(rng, repo, under):
    """An identifier defined in the module: a function or class name from one of its headers."""
    headers = [f for f in repo.text_files if f.startswith(under) and f.endswith(".h")]
    if not headers:
        headers = [f for f in repo.text_files if f.startswith(under)]
    rng.shuffle(headers)
    for h in headers:
        names = re.findall(r"^\s*(?:class|struct)\s+([A-Z][A-Za-z0-9]+)\b|^[A-Za-z:<>_ ]+\s\*?&?([a-z_][a-z0-9_]{5,})\(",
                           repo.read(h), re.M)
        names = [a or b for a, b in names if (a or b)]
        if names:
            return rng.choice(names), h
    return None, None


def build_session(rng, repo, index, target_tokens, notes):
    under, opening = TASKS[index % len(TASKS)]
    s = Session(rng, repo, f"s{index:02d}", int(target_tokens * CHARS_PER_TOKEN))
    system = SYSTEM_INSTRUCTIONS + "\n\n# Project notes\n\n" + notes
    s.chars += len(system) + len(json.dumps(TOOLS))
    s.history_budget = s.target - s.chars
    s.user(opening)
    module_files = [f for f in repo.text_files if f.startswith(under)]
    others = [f for f in repo.text_files if f.startswith(("src/", "tests/", "docs/"))]
    read_already = set()
    turn = 0
    while s.chars < s.target * 0.9:
        turn += 1
        room = s.target - s.chars
        # The first two calls search (their results hold the values the closing questions ask for);
        # then a mix, reads most often.
        first = {1: "grep", 2: "glob"}
        kind = first.get(turn) or rng.choices(["read", "grep", "ls", "glob", "diff", "edit"], weights=[6, 3, 1, 1, 1, 1])[0]
        if kind == "read":
            pool = [f for f in module_files + rng.sample(others, 5) if f not in read_already] or others
            f = rng.choice(pool)
            read_already.add(f)
            text = repo.read(f)
            # A session holds 12 or more calls: no result takes more than 1/12 of its size.
            max_lines = max(20, min(int(room / 45), int(s.history_budget / (12 * 45))))
            body = cat_n(text, 1, min(len(text.splitlines()), max_lines, rng.choice([40, 80, 120, 160, 220])))
            s.call("Read", {"file_path": f"{ROOT}/{f}"}, body)
        elif kind == "grep":
            pattern, defined_in = pick_pattern(rng, repo, under if rng.random() < 0.7 else "src/")
            if not pattern:
                turn -= turn <= 2
                continue
            hits = repo.grep(re.escape(pattern), "src/") + repo.grep(re.escape(pattern), "tests/")
            hits = hits[:min(rng.choice([10, 20, 30]), max(6, s.history_budget // (12 * 90)))]
            if not hits:
                continue
            body = "\n".join(f"{f}:{i}:{line}" for f, i, line in hits)
            s.call("Grep", {"pattern": pattern, "path": f"{ROOT}/src"}, body,
                   preamble=rng.choice(["", "Let me search for it.", "Searching the sources first."]))
            s.facts.append(("grep", pattern, hits[0][0]))
        elif kind == "ls":
            folder = rng.choice([under, "src/keel", "tests", "docs", "src/keel/kv", "eval"])
            s.call("Bash", {"command": f"ls -la {ROOT}/{folder}", "description": f"List {folder}"}, ls_la(repo, folder))
        elif kind == "glob":
            ext = rng.choice(["*.h", "*.cpp", "*_test.cpp"])
            folder = under if rng.random() < 0.6 else "src/keel/" + rng.choice(["kv", "eval", "engine", "chat", "api"])
            matches = [f"{ROOT}/{f}" for f in repo.files if f.startswith(folder) and fnmatch.fnmatch(f.rsplit("/", 1)[-1], ext)]
            if not matches:
                turn -= turn <= 2
                continue
            rng.shuffle(matches)  # by modification time, as Claude Code's Glob lists them
            s.call("Glob", {"pattern": f"{folder}/**/{ext}"}, "\n".join(matches))
            s.facts.append(("glob", f"{folder}/**/{ext}", matches[0][len(ROOT) + 1:]))
        elif kind == "diff":
            sha = rng.choice(repo.history)
            body = repo.diff(sha, under if rng.random() < 0.5 else "")
            body = body[: min(rng.choice([3000, 5000, 8000]), max(1500, int(room * 0.6)), max(1500, s.history_budget // 12))]
            s.call("Bash", {"command": f"git show {sha[:10]}", "description": "Show a recent commit"}, body)
        elif kind == "edit" and read_already:
            f = rng.choice(sorted(read_already))
            lines = [l for l in repo.read(f).splitlines() if len(l.strip()) > 20]
            if not lines:
                continue
            old = rng.choice(lines)
            s.call("Edit", {"file_path": f"{ROOT}/{f}", "old_string": old, "new_string": old.rstrip() + "  // checked"},
                   f"The file {ROOT}/{f} has been updated.")
        if turn % rng.choice([3, 4, 5]) == 0 and s.chars < s.target * 0.85:
            s.user(rng.choice(FOLLOW_UPS))
    return s, system


def question_for(rng, fact):
    """A request whose expected call depends on a value seen earlier in a tool result only: the
    file a search or a glob listed first (the question names the search, never the file)."""
    kind, a, b = fact
    name = b.rsplit("/", 1)[-1]
    if kind == "grep":
        q = rng.choice([f"Open the file where the search for {a} found its first match.",
                        f"Read the file with the first match of the {a} search from earlier."])
    else:
        q = rng.choice([f"Read the first file that the {a} glob listed.",
                        f"Open the first file of the {a} file list you found earlier."])
    return q, {"tool": "Read", "arguments": {"file_path": {"contains": name}}}


def to_openai(messages):
    """Anthropic-form history (as built above) to the OpenAI form suites use."""
    out = []
    for m in messages:
        if isinstance(m["content"], str):
            out.append({"role": m["role"], "content": m["content"]})
            continue
        if m["role"] == "assistant":
            text = "".join(c["text"] for c in m["content"] if c["type"] == "text")
            calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["input"]}}
                     for c in m["content"] if c["type"] == "tool_use"]
            out.append({"role": "assistant", "content": text, "tool_calls": calls})
        else:
            for c in m["content"]:
                out.append({"role": "tool", "tool_call_id": c["tool_use_id"], "content": c["content"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=".")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--min-tokens", type=int, default=10000)
    ap.add_argument("--max-tokens", type=int, default=28000)
    ap.add_argument("--task-distance", type=int, default=4000,
                    help="about how many tokens after the result holding its value a task case asks for it")
    ap.add_argument("--tasks-per-session", type=int, default=1)
    ap.add_argument("--session", required=True)
    ap.add_argument("--suite", required=True)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    repo = Repo(args.repo, args.commit)
    design = repo.read("DESIGN.md") if "DESIGN.md" in repo.files else repo.read("docs/eval.md")
    docs = [f for f in repo.files if f.startswith("docs/") and f.endswith(".md")]
    cases, suite_cases = [], []
    n = args.sessions
    for i in range(n):
        target = args.min_tokens + (args.max_tokens - args.min_tokens) * i // max(1, n - 1)
        # Project notes: a slice of a real document, 4-8k characters.
        doc = design if i % 2 == 0 else repo.read(rng.choice(docs))
        notes = doc[: min(rng.randint(4000, 8000), int(0.25 * target * CHARS_PER_TOKEN))]
        s, system = build_session(rng, repo, i, target, notes)
        # The conversation ends with a request whose answer needs a value from far back.
        if s.facts:
            q, _ = question_for(rng, s.facts[0])
            s.user(q)
        cases.append({"name": f"{s.name} {TASKS[i % len(TASKS)][0]} ~{int(s.chars / CHARS_PER_TOKEN)} tokens",
                      "request": {"model": "tiny-toolcaller", "max_tokens": 200, "system": system, "tools": TOOLS,
                                  "messages": s.messages_so_far()}})
        # Task cases: cut the session about --task-distance tokens after the tool result that holds
        # the first fact (the session's first search), and ask for the value only that result holds.
        running, cut, fact_at = len(system) + len(json.dumps(TOOLS)), None, None
        first_fact = s.facts[0][2] if s.facts else None
        for k, m in enumerate(s.messages):
            running += len(json.dumps(m["content"])) + 40
            if fact_at is None and first_fact and m["role"] == "user" and first_fact in json.dumps(m["content"]):
                fact_at = running
            if (fact_at is not None and running >= fact_at + args.task_distance * CHARS_PER_TOKEN and
                    m["role"] == "user" and not isinstance(m["content"], str)):
                cut = k + 1
                break
        if cut is None:
            continue
        history = s.messages[:cut]
        history_text = json.dumps(history)
        usable = [f for f in s.facts if f[1] in history_text and f[2] in history_text]
        # The earliest facts: the farthest back from the question.
        for t, fact in enumerate(usable[: args.tasks_per_session]):
            q, expect = question_for(rng, fact)
            suite_cases.append({"name": f"{s.name} far-back {fact[0]} {t + 1}", "toolset": "coding",
                                "messages": [{"role": "system", "content": system}] + to_openai(history) +
                                            [{"role": "user", "content": q}],
                                "expect": expect})
    with open(args.session, "w") as f:
        json.dump({"model": "tiny-toolcaller", "generator": {
            "script": "eval/make_agent_sessions.py", "commit": args.commit, "seed": args.seed}, "cases": cases}, f,
            indent=1)
        f.write("\n")
    with open(args.suite, "w") as f:
        json.dump({"name": "agent-far-back", "toolsets": {"coding": TOOLS}, "cases": suite_cases}, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], file=sys.stderr)
    print(f"{len(suite_cases)} task cases", file=sys.stderr)


if __name__ == "__main__":
    main()
