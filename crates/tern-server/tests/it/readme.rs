//! README.md's "Write a server": its test runs here as written, and each
//! of its Rust blocks is checked to be, verbatim, in a file that compiles
//! (an example, or this file).

use serde_json::json;
use tern_server::testing::TestClient;

#[path = "../../examples/asking_tool.rs"]
#[allow(dead_code, reason = "the example's main is not called here")]
mod asking_tool;

use asking_tool::server;

#[tokio::test]
async fn provision_asks_for_a_region_then_creates() {
    let client = TestClient::new(server().unwrap());
    let args = json!({"name": "orders"});

    // Round 1: the tool asks; the state is sealed, opaque to the client.
    let first = client.call_tool("provision_database", args.clone()).await;
    assert_eq!(first.result_type(), Some("input_required"));
    assert_eq!(first.input_keys(), ["region"]);

    // Round 2: the same call, the answer under the key asked, the state echoed.
    let answer = json!({"region": {"action": "accept", "content": {"region": "eu-west-1"}}});
    let done = client
        .retry_tool("provision_database", args, answer, first.request_state())
        .await;
    assert_eq!(
        done.text(),
        Some("Created orders in EuWest1 (id db-orders-euwest1)")
    );
}

/// The Rust blocks of the README section `heading`.
fn rust_blocks(readme: &str, heading: &str) -> Vec<String> {
    let start = readme.find(heading).expect("the README section is there");
    let section = &readme[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    section
        .split("```rust\n")
        .skip(1)
        .map(|block| block[..block.find("```").unwrap()].to_owned())
        .collect()
}

#[test]
fn the_readme_server_code_is_code_that_compiles() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let here = env!("CARGO_MANIFEST_DIR");
    let sources: Vec<String> = [
        "examples/stdio_server.rs",
        "examples/asking_tool.rs",
        "examples/http_server.rs",
        "tests/it/readme.rs",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(format!("{here}/{f}")).unwrap())
    .collect();
    let blocks = rust_blocks(&readme, "## Write a server");
    assert!(
        blocks.len() >= 4,
        "the section shows a server, a question, HTTP and a test"
    );
    for block in blocks {
        assert!(
            sources.iter().any(|s| s.contains(&block)),
            "this README block is in no example or test, so nothing compiles it:\n{block}"
        );
    }
}
