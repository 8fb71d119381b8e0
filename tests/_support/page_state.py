"""Scripts the browser tests run in the app's page to read its state (Playwright's
`page.wait_for_function` and `page.evaluate`), kept in one place so that every test reads the
page as the others do."""

# The app shows a result (its status starts with ●).
SHOWN_JS = ("() => { const s = document.querySelector('.explorer-status [data-result]');"
            " return s && s.textContent.startsWith('●'); }")
# The time limit's box in the sidebar.
LIMIT = ".explorer-timeout input"
# The address names an exploration whose time limit is `seconds` (its compact JSON, base64url).
NAMES_LIMIT = ("seconds => { const m = location.search.match(/exploration=([^&]+)/);"
               " return !!m && atob(m[1].replace(/-/g, '+').replace(/_/g, '/'))"
               ".includes('\"timeout\":' + seconds); }")
# A result is shown and every view on screen drew it (plotly figures carry its id in
# layout.meta.result, HTML views in data-result), and a figure is drawn.
DRAWN_JS = """() => {
  const s = document.querySelector('.explorer-status [data-result]');
  if (!s || !s.textContent.startsWith('●')) return false;
  const shown = e => e.offsetParent !== null && getComputedStyle(e).visibility !== 'hidden';
  const figs = [...document.querySelectorAll('.explorer-app .js-plotly-plot')].filter(shown);
  const texts = [...document.querySelectorAll('.explorer-app .explorer-drawn')].filter(shown);
  return figs.length > 0
    && figs.every(e => String(e.layout.meta && e.layout.meta.result) === s.dataset.result)
    && texts.every(e => e.dataset.result === s.dataset.result);
}"""
