//! The `--root` folders as `file://` roots (none without `--root`: then no
//! roots are declared).

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

/// The roots for `--root` paths, canonicalised (a folder that does not
/// exist is a usage error: a server would be told to look where nothing
/// is).
pub(crate) fn roots(paths: &[std::path::PathBuf]) -> Result<Vec<Root>, String> {
    paths
        .iter()
        .map(|p| {
            let abs = p
                .canonicalize()
                .map_err(|e| format!("--root {}: {e}", p.display()))?;
            if !abs.is_dir() {
                return Err(format!("--root {}: not a folder", p.display()));
            }
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
    fn no_root_without_root_and_a_missing_folder_is_refused() {
        assert!(roots(&[]).unwrap().is_empty());
        let here = roots(&[".".into()]).unwrap();
        assert_eq!(here.len(), 1);
        assert!(here[0].uri.starts_with("file:///"), "{}", here[0].uri);
        assert!(
            !here[0].uri.ends_with("/."),
            "canonicalised: {}",
            here[0].uri
        );
        assert!(roots(&["/no/such/folder/anywhere".into()]).is_err());
    }
}
