use super::*;
use std::process::Command;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tailguard-config-file-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn reads_a_regular_file_and_a_symlink_to_one() {
    let dir = temp_dir("regular");
    let path = dir.join("a.txt");
    std::fs::write(&path, b"127.0.0.1:1\n").unwrap();
    // Kubernetes mounts a ConfigMap's files as symlinks.
    let link = dir.join("link.txt");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert_eq!(read(&path, 100).unwrap(), b"127.0.0.1:1\n");
    assert_eq!(read(&link, 100).unwrap(), b"127.0.0.1:1\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fifo_is_refused_at_once_naming_it() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("config.yaml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let err = read(&fifo, 100).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        matches!(err.problem, Problem::NotRegular("a FIFO")),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}: not a regular file (a FIFO); configuration is read from regular files only",
            fifo.display()
        )
    );
}

#[tokio::test]
async fn async_reads_refuse_the_same_files() {
    let dir = temp_dir("async");
    let err = read_async(&dir, 100).await.unwrap_err();
    assert!(
        matches!(err.problem, Problem::NotRegular("a directory")),
        "{err}"
    );
    let err = read_async(Path::new("/dev/zero"), 100).await.unwrap_err();
    assert!(
        matches!(err.problem, Problem::NotRegular("a character device")),
        "{err}"
    );
    let missing = dir.join("missing");
    let err = read_async(&missing, 100).await.unwrap_err();
    assert!(matches!(err.problem, Problem::Io(_)), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reads_at_most_the_limit() {
    let dir = temp_dir("size");
    let path = dir.join("big");
    std::fs::write(&path, vec![b'#'; 101]).unwrap();
    let err = read(&path, 100).unwrap_err();
    assert!(matches!(err.problem, Problem::TooLarge(100)), "{err}");
    assert_eq!(read(&path, 101).unwrap().len(), 101);
    std::fs::remove_dir_all(&dir).unwrap();
}
