//! Records which Cargo profile built this crate, and whether LLVM's profile-guided
//! optimisation did (`scripts/build-pgo.sh`), so that `tailguard bench` and `demo` say it:
//! figures from the quick `release` build, the `dist` build the published ones come from and a
//! PGO build are not comparable.

fn main() {
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    let profile = std::path::Path::new(&out)
        .ancestors()
        .nth(3)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("unknown")
        .to_owned();
    println!("cargo:rustc-env=TAILGUARD_BUILD_PROFILE={profile}");
    // The flags rustc gets for this crate, separated by 0x1f. The instrumented build counts
    // as PGO too: its code must be the optimised build's, or LLVM finds `bench::run` changed
    // between the two and discards its counts (a "hash mismatch" warning).
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let pgo = flags
        .split('\x1f')
        .any(|f| f.contains("profile-use") || f.contains("profile-generate"));
    println!(
        "cargo:rustc-env=TAILGUARD_BUILD_PGO={}",
        if pgo { "1" } else { "" }
    );
    println!("cargo:rerun-if-changed=build.rs");
}
