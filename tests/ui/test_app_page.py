"""The app notebook's cell (explorer._src.app_page.app_page): a page that cannot be built shows the
explorer's own message, what failed and what to do, never Voila's generic cell error."""

from explorer._src.app_page import APP_EXTRA, FailedPage, app_page, page_or_failure


def test_a_bad_default_names_the_value_and_the_choices():
    page = app_page(workload="mlpp", mesh="data=2,model=4", debounce=None)
    assert isinstance(page, FailedPage)
    html = page._repr_html_()
    assert "The app could not open" in html
    assert "mlpp" in html and "transformer" in html       # the bad value, the valid choices
    assert "reload this page" in html


def test_a_missing_package_says_what_to_install():
    def build():
        raise ModuleNotFoundError("No module named 'ipywidgets'", name="ipywidgets")

    page = page_or_failure(build)
    assert isinstance(page, FailedPage)
    assert "'ipywidgets'" in page.message and APP_EXTRA in page.message


def test_a_bug_is_called_one_and_logged(caplog):
    def build():
        raise RuntimeError("boom")

    page = page_or_failure(build)
    assert page.message.startswith("The app could not start because of an unexpected error")
    assert "RuntimeError: boom" in page.message
    assert "the page could not be built" in caplog.text and "boom" in caplog.text


def test_the_message_is_escaped():
    page = FailedPage("<script>alert(1)</script>")
    assert "<script>" not in page._repr_html_()


def test_a_good_page_is_the_app():
    page = app_page(workload="mlp", mesh="data=2,model=4", debounce=None,
                    params={"batch": 8, "d_model": 16, "d_ff": 32})
    assert type(page).__name__ == "AppPage"
    assert page.app.report is not None
    page.app.close()
