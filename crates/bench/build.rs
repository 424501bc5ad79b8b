//! Records which Cargo profile built this crate, so that `tailguard bench` and `demo` say it:
//! figures from the quick `release` build and from the `dist` build the published ones come
//! from are not comparable.

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
    println!("cargo:rerun-if-changed=build.rs");
}
