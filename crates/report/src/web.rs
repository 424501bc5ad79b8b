//! The browser side of tailguard's pages: one script that draws charts the way [`crate::svg`]
//! does (same layout, palette, tick rules) and formats values the way [`crate::units`] does,
//! and one stylesheet. The proxy's dashboard and the live `bench`/`demo` page inline both, so
//! a page needs nothing from elsewhere.

/// The script: a `TG` object with `chart`, `us`, `rate`, `pct`, `number`, `esc`, and the
/// pages' `tile` and `cell`.
const CHART_JS: &str = include_str!("web/chart.js");

/// The stylesheet.
pub const STYLE: &str = include_str!("web/style.css");

/// The script with [`crate::svg::PALETTE`] filled in.
pub fn script() -> String {
    let palette: Vec<String> = crate::svg::PALETTE
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect();
    CHART_JS.replace("/*PALETTE*/[]", &format!("[{}]", palette.join(",")))
}

/// `page` with `/*STYLE*/` and `/*SCRIPT*/` replaced by the stylesheet and the script.
pub fn inline(page: &str) -> String {
    page.replacen("/*STYLE*/", STYLE, 1)
        .replacen("/*SCRIPT*/", &script(), 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_page_gets_the_style_the_script_and_the_palette() {
        let page = super::inline("<style>/*STYLE*/</style><script>/*SCRIPT*/</script>");
        assert!(page.contains(".tiles{"));
        assert!(page.contains("const TG ="));
        assert!(page.contains("const PALETTE = [\"#1f77b4\","));
        assert!(!page.contains("/*"), "every placeholder filled");
    }
}
