//! The HTML report: the chart and the text tables on one self-contained page.

use super::{svg, text, Report};
use tailguard_report::svg::escape;

/// A self-contained HTML page (no scripts, no external files).
pub fn html(report: &Report) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>tailguard sim {name}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em;}}pre{{font-size:13px;}}</style>\n\
         </head>\n<body>\n<h1>tailguard sim {name}</h1>\n<p>{load}</p>\n{chart}<pre>{table}</pre>\n\
         </body>\n</html>\n",
        name = escape(&report.scenario),
        load = escape(&report.load),
        chart = svg(report),
        table = escape(&text(report)),
    )
}
