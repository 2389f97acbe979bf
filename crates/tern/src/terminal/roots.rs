//! The `--root` folders as `file://` roots (default: the working folder).

use std::fmt::Write as _;
use std::path::Path;

use tern_protocol::roots::Root;

/// `path` as a `file://` URI: absolute, each byte outside the unreserved set
/// and `/` percent-encoded (so a space is `%20`).
pub(crate) fn file_uri(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut uri = String::from("file://");
    if !text.starts_with('/') {
        uri.push('/');
    }
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(char::from(b));
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri
}

/// The roots for `--root` paths (default: the working folder).
pub(crate) fn roots(paths: &[std::path::PathBuf]) -> Result<Vec<Root>, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no working folder: {e}"))?;
    let paths = if paths.is_empty() {
        vec![cwd.clone()]
    } else {
        paths.to_vec()
    };
    paths
        .iter()
        .map(|p| {
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                cwd.join(p)
            };
            let abs = abs.canonicalize().unwrap_or(abs);
            let mut root = Root::new(file_uri(&abs));
            root.name = abs.file_name().map(|n| n.to_string_lossy().into_owned());
            Ok(root)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_are_percent_encoded() {
        assert_eq!(
            file_uri(Path::new("/home/ada/my project")),
            "file:///home/ada/my%20project"
        );
        assert_eq!(file_uri(Path::new("/a/é#")), "file:///a/%C3%A9%23");
    }

    #[test]
    fn the_default_root_is_the_working_folder() {
        let roots = roots(&[]).unwrap();
        assert_eq!(roots.len(), 1);
        assert!(roots[0].uri.starts_with("file:///"));
    }
}
