"""A minimal 2025-11-25 MCP server over stdio, written from the 2025 spec
without any SDK: initialize, tools/list, and a tool that asks with a live
elicitation/create request and waits for the reply. Options:
  --exit-on-probe   exit when the first message is not `initialize` (the
                    client must start it again and initialize at once).
  --silent-probe    ignore requests before `initialize` (the client's probe
                    times out).
  --log FILE        append the method of each request received to FILE.
  --record FILE     append, as JSON lines, the capabilities `initialize`
                    declared and the client's reply to `roots/list`.
  --chatty         write a line on standard error at start (a healthy
                    server's chatter).
  --url-required   answer tools/call with -32042 (URL elicitation required)
                    naming two pages, one with hostile bytes in its URL.
  --ask-roots       after `notifications/initialized`, ask `roots/list` (as
                    server-filesystem does) when the client declared roots.
  --url-once        offer a prompt `greeting` and a resource `file:///notes`;
                    the first prompts/get and the first resources/read are
                    answered -32042 naming one page, the next ones served.
  --resources       declare `resources` with `subscribe` and `listChanged`;
                    `resources/subscribe` of a `file:` URI is accepted (any
                    other is refused -32602), and every 0.2 s each URI
                    subscribed gets `notifications/resources/updated`;
                    `resources/unsubscribe` stops it (logged with --log as
                    `unsubscribe URI`).
"""
import json
import sys
import threading
import time

exit_on_probe = "--exit-on-probe" in sys.argv
silent_probe = "--silent-probe" in sys.argv
log = sys.argv[sys.argv.index("--log") + 1] if "--log" in sys.argv else None
record = sys.argv[sys.argv.index("--record") + 1] if "--record" in sys.argv else None
ask_roots = "--ask-roots" in sys.argv
url_required = "--url-required" in sys.argv
resources = "--resources" in sys.argv
url_once = "--url-once" in sys.argv
owed = {"prompts/get", "resources/read"}
subscribed = set()
lock = threading.Lock()
if "--chatty" in sys.argv:
    sys.stderr.write("chatty server: started, all is well\n")
    sys.stderr.flush()
declared = {}
initialized = False
first = True


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def updates():
    while True:
        time.sleep(0.2)
        with lock:
            uris = sorted(subscribed)
        for uri in uris:
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})


if resources:
    threading.Thread(target=updates, daemon=True).start()


def note(entry):
    if record:
        with open(record, "a") as f:
            f.write(json.dumps(entry) + "\n")


def recv():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


TOOLS = [{"name": "provision_database", "description": "Creates a database",
          "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}]

while True:
    msg = recv()
    method = msg.get("method")
    if log and method and "id" in msg:
        with open(log, "a") as f:
            f.write(method + "\n")
    if first and method != "initialize":
        if exit_on_probe:
            sys.exit(3)
    first = False
    if method == "notifications/initialized" and ask_roots and "roots" in declared:
        send({"jsonrpc": "2.0", "id": "r0", "method": "roots/list"})
    if msg.get("id") == "r0" and method is None:
        note({"roots": msg})
    if "id" not in msg or method is None:
        continue
    if method == "initialize":
        initialized = True
        declared = msg["params"].get("capabilities", {})
        note({"capabilities": declared})
        caps = {"tools": {}}
        if url_once:
            caps["prompts"] = {}
            caps["resources"] = {}
        if resources:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": caps,
            "serverInfo": {"name": "legacy-stdio", "version": "1.0"}}})
    elif not initialized:
        if not silent_probe:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32602, "message": "Invalid request parameters"}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": TOOLS}})
    elif method == "resources/subscribe" and resources:
        uri = msg["params"]["uri"]
        if uri.startswith("file:"):
            with lock:
                subscribed.add(uri)
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32602, "message": "Resource not found"}})
    elif method == "resources/unsubscribe" and resources:
        uri = msg["params"]["uri"]
        with lock:
            subscribed.discard(uri)
        if log:
            with open(log, "a") as f:
                f.write("unsubscribe " + uri + "\n")
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    elif url_once and method in owed:
        owed.discard(method)
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {
            "code": -32042, "message": "Sign in first.",
            "data": {"elicitations": [
                {"mode": "url", "elicitationId": "s1", "message": "Sign in to read this",
                 "url": "https://auth.example/sign-in"}]}}})
    elif url_once and method == "prompts/list":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"prompts": [{"name": "greeting"}]}})
    elif url_once and method == "prompts/get":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"messages": [
            {"role": "user", "content": {"type": "text", "text": "Hello after sign-in"}}]}})
    elif url_once and method == "resources/list":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"resources": [{"uri": "file:///notes", "name": "notes"}]}})
    elif url_once and method == "resources/read":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"contents": [
            {"uri": "file:///notes", "mimeType": "text/plain", "text": "notes after sign-in"}]}})
    elif method == "tools/call" and url_required:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {
            "code": -32042, "message": "This request requires more information.",
            "data": {"elicitations": [
                {"mode": "url", "elicitationId": "e1", "message": "Sign in to \x1b]0;pwned\x07the bank",
                 "url": "https://auth.example/start?x=1\x1b[8m"},
                {"mode": "url", "elicitationId": "e2", "message": "Then this",
                 "url": "javascript:alert(1)"}]}}})
    elif method == "tools/call":
        name = msg["params"]["arguments"]["name"]
        send({"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": {
            "message": "Which region should %s live in?" % name,
            "requestedSchema": {"type": "object", "properties": {"region": {"type": "string"}}, "required": ["region"]}}})
        while True:
            reply = recv()
            if reply.get("id") == "q1" and "method" not in reply:
                break
        result = reply.get("result", {})
        if result.get("action") == "accept":
            text = "Created %s in %s" % (name, result["content"]["region"])
        else:
            text = "Provisioning cancelled."
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": text}]}})
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
