extension ConsolePages {
    /// The console's one stylesheet, served at ``ConsolePaths/stylesheet`` as `text/css`: the pages
    /// have no style attribute and no `<style>` block, so that a CSP of `style-src 'self'` holds.
    ///
    /// Readable from 360 px up: tables of class `stack` become one block per row on narrow screens
    /// (each cell labelled by its `data-label`), other wide content scrolls in its region. Focus is
    /// always visible; colours follow the system's light or dark scheme.
    public static let stylesheet = """
        :root {
          color-scheme: light dark;
          --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --line: #d0d7de; --panel: #f6f8fa;
          --accent: #0a58ca; --on: #116329; --off: #9a6700; --bad: #b42318; --focus: #ff8c00;
        }
        @media (prefers-color-scheme: dark) {
          :root {
            --fg: #e6edf3; --bg: #0d1117; --muted: #9da7b3; --line: #30363d; --panel: #161b22;
            --accent: #6cb6ff; --on: #56d364; --off: #e3b341; --bad: #ff7b72;
          }
        }
        *, *::before, *::after { box-sizing: border-box; }
        html { -webkit-text-size-adjust: 100%; }
        body {
          margin: 0; color: var(--fg); background: var(--bg);
          font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
        }
        a { color: var(--accent); }
        code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.92em;
          overflow-wrap: break-word; }
        :focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
        .skip { position: absolute; left: -10000px; top: 0; padding: 0.5rem 1rem; background: var(--bg); }
        .skip:focus { left: 0.5rem; z-index: 10; }
        .visually-hidden {
          position: absolute !important; width: 1px; height: 1px; margin: -1px; padding: 0; overflow: hidden;
          clip: rect(0 0 0 0); white-space: nowrap; border: 0;
        }
        header.site {
          display: flex; flex-wrap: wrap; gap: 0.5rem 1.5rem; align-items: center;
          padding: 0.75rem 1rem; border-bottom: 1px solid var(--line); background: var(--panel);
        }
        header.site p { margin: 0; }
        .brand a { font-weight: 700; text-decoration: none; color: var(--fg); }
        nav ul { display: flex; gap: 1rem; list-style: none; margin: 0; padding: 0; }
        nav a[aria-current="page"] { font-weight: 700; text-decoration-thickness: 3px; }
        .account { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; margin-left: auto; }
        .account form { margin: 0; }
        main { padding: 1rem; max-width: 90rem; margin: 0 auto; }
        h1 { font-size: 1.6rem; margin: 0.5rem 0 1rem; overflow-wrap: anywhere; }
        h2 { font-size: 1.25rem; margin: 2rem 0 0.75rem; }
        h3 { font-size: 1.05rem; margin: 1rem 0 0.5rem; overflow-wrap: anywhere; }
        .hint { color: var(--muted); font-size: 0.92rem; }
        .notice { padding: 0.75rem 1rem; border-left: 4px solid var(--accent); background: var(--panel); }
        .notice.error { border-color: var(--bad); }
        .notice.success { border-color: var(--on); }
        label { display: block; font-weight: 600; }
        input[type="text"], input[type="password"], input[type="number"] {
          font: inherit; width: 100%; max-width: 24rem; padding: 0.4rem 0.5rem; color: var(--fg);
          background: var(--bg); border: 1px solid var(--muted); border-radius: 4px;
        }
        input[type="checkbox"] { width: 1.25rem; height: 1.25rem; }
        button {
          font: inherit; padding: 0.4rem 0.9rem; border-radius: 4px; cursor: pointer;
          border: 1px solid var(--muted); background: var(--panel); color: var(--fg); min-height: 2.5rem;
        }
        button.primary { background: var(--accent); border-color: var(--accent); color: var(--bg); }
        button.danger { border-color: var(--bad); color: var(--bad); }
        form.inline { display: flex; flex-wrap: wrap; gap: 0 1rem; align-items: flex-end; }
        form.inline p { margin: 0.25rem 0; }
        fieldset { border: 1px solid var(--line); border-radius: 4px; margin: 1rem 0; }
        legend { font-weight: 600; padding: 0 0.25rem; }
        .buttons { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; }
        dl.figures, dl.settings { display: grid; gap: 0.5rem 1.5rem; margin: 0; }
        dl.figures { grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); }
        dl.figures dd { font-size: 1.5rem; font-weight: 700; margin: 0; }
        dl.settings { grid-template-columns: minmax(10rem, max-content) 1fr; }
        dl.settings div, dl.tags div { display: contents; }
        dt { color: var(--muted); }
        dd { margin: 0; overflow-wrap: break-word; }
        dl.tags { display: grid; grid-template-columns: max-content 1fr; gap: 0 0.5rem; margin: 0; }
        dl.tags dt::after { content: ":"; }
        .scroll { overflow-x: auto; max-width: 100%; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; vertical-align: top; padding: 0.5rem; border-bottom: 1px solid var(--line); }
        thead th { background: var(--panel); white-space: nowrap; }
        td[data-label="Up"], td[data-label="Serves"] { white-space: nowrap; }
        td.content { max-width: 24rem; overflow-wrap: break-word; }
        ol.times, ul.bodies, ul.pushes, ul.ids, ul.results { margin: 0; padding-left: 1.25rem; }
        .utc { color: var(--muted); font-size: 0.88rem; white-space: nowrap; }
        .state { font-weight: 600; }
        .state.on { color: var(--on); }
        .state.off, .state.late, .state.pending { color: var(--off); }
        .state.done { color: var(--muted); }
        section.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
        section.charts h3 { flex-basis: 100%; }
        figure { margin: 0; flex: 1 1 20rem; max-width: 36rem; }
        figcaption { color: var(--muted); font-size: 0.9rem; }
        svg.chart { width: 100%; height: auto; display: block; }
        svg.chart .bar { fill: var(--accent); }
        svg.chart .axis, svg.chart .count, svg.chart .empty { fill: var(--fg); font-size: 9px; }
        svg.chart .empty { fill: var(--muted); font-size: 12px; }
        svg.chart .axis-line { stroke: var(--muted); stroke-width: 1; }
        @media (max-width: 40rem) {
          main { padding: 0.75rem; }
          table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
          table.stack, table.stack tbody, table.stack tr, table.stack td, table.stack th {
            display: block; width: 100%;
          }
          table.stack tr {
            border: 1px solid var(--line); border-radius: 4px; margin-bottom: 0.75rem; padding: 0.25rem;
          }
          table.stack td, table.stack th[scope="row"] { border: 0; padding: 0.25rem 0.5rem; }
          table.stack td::before, table.stack th[scope="row"]::before {
            content: attr(data-label); display: block; font-weight: 600; color: var(--muted); font-size: 0.85rem;
          }
          td.content { max-width: none; }
          dl.settings { grid-template-columns: 1fr; }
          dl.settings dd { margin-bottom: 0.5rem; }
          .account { margin-left: 0; }
        }

        """
}
