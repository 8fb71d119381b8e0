"""The app's tabs: one class per tab, and the registry the app builds its tabs from.

A tab owns its views and widgets, draws the app's current result when it is shown, and says
which result each of its views drew (`App.drawn_results`). Adding a tab takes its title in
explorer._src.api.exploration.AppTab (the one list of the titles, which a saved exploration names)
and its Tab class in REGISTRY; nothing else names it.

Only the visible tab is drawn; the others when they are shown. A tab whose views drew an older
result than the app's is hidden (`explorer-outdated`) until drawn again, so that a view of an
earlier result is never on screen beside the current one; the visible tab is drawn again in
place, and its figures (every tab's) are hidden before the status names the new result, each
until drawn for it (`Tabs.outdate`). The cheap text views are kept current in hidden tabs too
(`new_result`), so that a page can read them.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

import ipywidgets as w

from explorer._src.api.exploration import AppTab
from explorer._src.api.what_if import SpecChange
from explorer._src.report.report import Report, TensorRole
from explorer._src.ui.callbacks import Mute
from explorer._src.ui.capacity import CapacityView
from explorer._src.ui.code import CodePanel
from explorer._src.ui.compare import CompareView
from explorer._src.ui.figure import drawn_result, outdate_figures
from explorer._src.ui.graph import GraphView
from explorer._src.ui.grids import mesh_grid, placement_grid
from explorer._src.ui.memory import MemoryView
from explorer._src.ui.origins import OriginsPanel
from explorer._src.ui.sources import GROUP_OF_KIND, AppRequest, InputTensor, Source
from explorer._src.ui.suggest.job import SearchJob
from explorer._src.ui.suggest.view import SuggestView
from explorer._src.ui.timeline import TimingView, timing_html
from explorer._src.ui.views import (
    OUTDATED,
    CollectivesView,
    PlacementView,
    collectives_html,
    hlo_html,
    legend_html,
    stamped,
    tensor_options,
)
from explorer._src.ui.why import WhyPanel
from explorer._src.ui.xprof import XprofPanel
from explorer._src.workloads.base import TensorKind

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from explorer._src.api.session import Session
    from explorer._src.compile.pool import WorkerPool
    from explorer._src.layout_search.result import Candidate

    # What a tab's views drew: its figures by view (their stamps are read), its text views' ids.
    Drawn = tuple[Mapping[str, go.FigureWidget | None], Mapping[str, int | None]]



class ShownResult(Protocol):
    """What a tab reads from the app (explorer._src.ui.app.App): the result on screen."""

    report: Report | None
    request: AppRequest | None          # the request the report answers
    result_id: int                   # the id every view drawing the report is stamped with
    selected: int | None             # the collective picked in the Collectives tab
    unavailable: str | None          # why the report has no prediction
    session: Session | None
    source: Source
    pool: WorkerPool | None


@dataclass(frozen=True)
class TabContext:
    """What every tab is made with: the app whose result it draws, and what it may ask of the
    app. Each callable acts on the app as it is when called."""

    app: ShownResult
    guard: Callable[[Callable], Callable]   # a widget callback whose errors the app shows
    muted: Mute                             # the app's own widget changes in progress
    redraw: Callable[[AppTab], None]        # draw a tab again: now if visible, else when shown
    edit: Callable[[], None]                # the request changed: check it and compile
    inputs: Callable[[], list[InputTensor]]     # the program's inputs, as the sidebar lists them
    select_collective: Callable[[int | None], None]
    use_target: Callable[[str], None]           # pick a target offered because it fits the mesh
    offered_target: Callable[[], str | None]    # that target, where the picked one does not fit
    apply_what_if: Callable[[SpecChange], None]
    snapshot: Callable[[], tuple[Source, AppRequest]]   # the source and its checked request now
    apply_suggestion: Callable[[SearchJob, Candidate], None]
    # The dataflow graph: drawn in the HLO tab, ringed with the origin path of the tensor the
    # Placement tab explains.
    graph: GraphView


class Tab(Protocol):
    """One tab of the app, made with the app's TabContext. A concrete tab subclasses this for
    its defaults."""

    title: ClassVar[AppTab]
    # Drawn for the app's result, and hidden while its views show an older one. A tab whose
    # content is not the result's (Suggest's searches) is drawn each time it is shown instead.
    follows_result: ClassVar[bool] = True
    widget: w.Widget

    def new_result(self) -> None:
        """A new result is the app's: bring the cheap views up to it, even while hidden."""

    def draw(self) -> None:
        """Draw the app's current result (there is one)."""

    def drawn(self, result: int | None) -> Drawn:
        """What `drawn_results` reports for the tab; `result` is the id of the result the tab
        was last drawn for."""
        return {}, {self.title.lower(): result}

    def close(self) -> None:
        """Stop what the tab runs (the app is closing)."""


class PlacementTab(Tab):
    """A tensor's blocks on the mesh, and why it is laid out so."""

    title = AppTab.PLACEMENT

    def __init__(self, context: TabContext):
        self._context = c = context
        self.placement = PlacementView(c.guard(lambda _: self._tensor_picked()),
                                       c.guard(lambda _: self.list_tensors()))
        # Why the picked tensor is laid out so: asking recompiles with origins read.
        self.origins = OriginsPanel(c.guard(lambda _: c.edit()),
                                    c.guard(lambda _: self._show_origin_path()))
        self.placement.widget.children = (*self.placement.widget.children, self.origins.widget)
        self.widget = self.placement.widget

    def new_result(self) -> None:
        self.list_tensors(redraw=False)

    def draw(self) -> None:
        app = self._context.app
        if app.report is None or self.placement.tensor.value is None:
            return
        name = self.placement.tensor.value
        blocks = placement_grid(app.report, name, app.source.dim_names(app.report, name))
        legend = legend_html(blocks, f"block of {name}: a block and the devices holding it "
                                     "share a colour")
        self.placement.draw(blocks, mesh_grid(app.report, name),
                            stamped(legend, app.result_id), app.result_id)
        self.origins.draw(app.report, name, app.result_id)
        self._show_origin_path()

    def drawn(self, result: int | None) -> Drawn:
        return ({"blocks": self.placement.blocks, "device grid": self.placement.mesh},
                {"legend": result})

    def _tensor_picked(self) -> None:
        if not self._context.muted:
            self._context.redraw(self.title)

    def list_tensors(self, redraw: bool = True) -> None:
        """The picker's entries for the current report, keeping the selection; the tab is
        drawn again when the picked tensor changes (`redraw`)."""
        report = self._context.app.report
        if report is None:
            return
        options = tensor_options(report, self.placement.plumbing.value)
        keep = self.placement.tensor.value
        names = [v for _, v in options]
        wanted = self._context.app.wanted_tensor
        with self._context.muted:
            self.placement.tensor.options = options
            self.placement.tensor.value = (keep if keep in names else wanted if wanted in names
                                           else self._default_tensor(names))
        if wanted in names:
            self._context.app.wanted_tensor = None
        if redraw and self.placement.tensor.value != keep:
            self._context.redraw(self.title)

    def _default_tensor(self, names: list[str]) -> str:
        """The tensor the tab opens on: the program's data (an input the sidebar lists under
        "inputs", as a batch), else its first input of two or more dimensions, else the first
        listed. A model's parameters come first, and its first is often a bias, the least
        telling picture of a layout."""
        group = GROUP_OF_KIND[TensorKind.INPUT]
        data = [t.name for t in self._context.inputs() if t.group == group]
        ranked = [t.name for t in self._context.app.report.tensors
                  if t.kind == TensorRole.INPUT and len(t.shape) >= 2]
        return next((n for n in data + ranked if n in names), names[0])

    def _show_origin_path(self) -> None:
        """The HLO tab's graph draws the path of the tensor this tab explains, when asked here
        (drawn again when it changes)."""
        tensor, graph = self.origins.path_tensor, self._context.graph
        if tensor != graph.path_tensor:
            graph.path_tensor = tensor
            self._context.redraw(AppTab.HLO)


class CollectivesTab(Tab):
    """The collectives table, the picked collective's device groups, and its why panel."""

    title = AppTab.COLLECTIVES

    def __init__(self, context: TabContext):
        self._context = c = context
        self.collectives = CollectivesView(c.guard(c.select_collective), c.guard(c.use_target))
        self.why = WhyPanel(c.guard(c.apply_what_if))
        self.collectives.widget.children = (*self.collectives.widget.children, self.why.widget)
        self.widget = self.collectives.widget

    def new_result(self) -> None:
        app = self._context.app
        with self._context.muted:          # no collective is picked in a new result
            self.collectives.pick.options = self.collectives.options(app.report)
            self.collectives.pick.value = -1
        self.why.clear()
        self.collectives.target_offer.offer(self._context.offered_target()
                                            if app.unavailable else None)
        self.collectives.table.value = stamped(
            collectives_html(app.report, unavailable=app.unavailable), app.result_id)
        self.collectives.result = app.result_id

    def draw(self) -> None:
        app = self._context.app
        self.collectives.draw(app.report, app.selected, app.unavailable, app.result_id)

    def drawn(self, result: int | None) -> Drawn:
        return ({"device groups": self.collectives.groups,
                 **{f"why layout {k}": f for k, f in enumerate(self.why.figs)}},
                {"table": self.collectives.result})


class MemoryTab(Tab):
    title = AppTab.MEMORY

    def __init__(self, context: TabContext):
        self._context = context
        self.memory = MemoryView()
        self.widget = self.memory.widget

    def draw(self) -> None:
        self.memory.update(self._context.app.report, self._context.app.result_id)

    def drawn(self, result: int | None) -> Drawn:
        return {"chart": self.memory.fig}, {"numbers": result}


class TimingTab(Tab):
    title = AppTab.TIMING

    def __init__(self, context: TabContext):
        self._context = context
        self.timing = TimingView()
        self.widget = self.timing.widget

    def new_result(self) -> None:
        app = self._context.app
        self.timing.text.value = stamped(timing_html(app.report, app.unavailable)
                                         + self._spent_html(), app.result_id)

    def _spent_html(self) -> str:
        """Where the wait for the session's current result went, under the text (drawing is
        counted in the session after the tab is drawn)."""
        session = self._context.app.session
        result = session.result if session is not None else None
        if result is None or result.generation != session.generation:
            return ""
        return (f"<p class='explorer-note'>This answer took {html.escape(result.spent.text())}"
                "</p>")

    def draw(self) -> None:
        app = self._context.app
        self.timing.update(app.report, app.unavailable, app.result_id, after=self._spent_html())

    def drawn(self, result: int | None) -> Drawn:
        return ({"timeline": self.timing.trace_fig, "roofline": self.timing.roofline,
                 "schedule": self.timing.schedule}, {"text": self.timing.result})


class HloTab(Tab):
    """The program's text (optimized, propagated or StableHLO), its dataflow graph, the layout
    as code, and the result as an XProf run."""

    title = AppTab.HLO

    def __init__(self, context: TabContext):
        self._context = c = context
        self.hlo_which = w.ToggleButtons(options=["optimized", "propagated", "stablehlo"])
        self.hlo_which.observe(c.guard(lambda _: c.redraw(self.title)), "value")
        self.hlo = w.HTML()
        self.code = CodePanel(c.guard)          # Copy as code: the layout as plain JAX
        self.xprof = XprofPanel(lambda: c.app.report, c.guard)   # the result as an XProf run
        self.graph = c.graph
        self.widget = w.VBox([self.hlo_which, self.code.widget, self.xprof.widget,
                              self.graph.widget, self.hlo])

    def draw(self) -> None:
        app = self._context.app
        self.hlo.value = stamped(hlo_html(app.report, self.hlo_which.value, app.selected),
                                 app.result_id)
        self.graph.update(app.report, app.selected, app.result_id)
        self.code.update(app.report)

    def drawn(self, result: int | None) -> Drawn:
        return {"dataflow graph": self.graph.fig}, {"module text": result}


class CompareTab(Tab):
    title = AppTab.COMPARE

    def __init__(self, context: TabContext):
        self._context = context
        self.compare = CompareView(lambda: context.app.report)
        self.widget = self.compare.widget

    def draw(self) -> None:
        self.compare.update(self._context.app.report)


class SuggestTab(Tab):
    """The searches: `explorer.search` and the largest batch that fits, each on a thread."""

    title = AppTab.SUGGEST
    follows_result = False       # a search is not the app's result; its choices follow the app

    def __init__(self, context: TabContext):
        app = context.app
        self.suggest = SuggestView(lambda: app.source, context.snapshot,
                                   context.apply_suggestion, app.pool, lambda: app.request)
        self.capacity = CapacityView(context.snapshot, app.pool)
        self.widget = w.VBox([self.suggest.widget, self.capacity.widget])

    def draw(self) -> None:
        self.suggest.refresh()

    def close(self) -> None:
        self.suggest.close()


def _in_app_order(*tabs: type[Tab]) -> tuple[type[Tab], ...]:
    """`tabs` in AppTab's order, one class per title: a title without its class, or a class
    whose title is not an AppTab, fails when this module is imported, not when drawn."""
    by_title = {cls.title: cls for cls in tabs}
    if len(by_title) != len(tabs) or set(by_title) != set(AppTab):
        raise RuntimeError(f"the tab registry has {[cls.title for cls in tabs]}; AppTab "
                           f"(explorer/_src/api/exploration.py) has {list(AppTab)}: one Tab class "
                           "per title")
    return tuple(by_title[title] for title in AppTab)


REGISTRY = _in_app_order(PlacementTab, CollectivesTab, MemoryTab, TimingTab, HloTab,
                         CompareTab, SuggestTab)
TAB_TITLES = tuple(cls.title for cls in REGISTRY)       # AppTab's titles, in the app's order

TabT = TypeVar("TabT", bound=Tab)


class Tabs:
    """The app's tabs, one of each REGISTRY class: each drawn when shown, and hidden while its
    views show an older result than the app's."""

    def __init__(self, context: TabContext):
        self._app = context.app
        self.all: tuple[Tab, ...] = tuple(cls(context) for cls in REGISTRY)
        self.widget = w.Tab(children=[tab.widget for tab in self.all])
        for index, tab in enumerate(self.all):
            self.widget.set_title(index, tab.title.value)
        # Tab -> the id of the result its views drew.
        self._drawn: dict[AppTab, int] = {}
        self.widget.observe(context.guard(lambda change: self.draw(change["new"])),
                            "selected_index")

    def __getitem__(self, title: str) -> Tab:
        return self.all[TAB_TITLES.index(AppTab(title))]

    def of(self, kind: type[TabT]) -> TabT:
        """The tab of class `kind`."""
        return next(tab for tab in self.all if isinstance(tab, kind))

    def outdate(self) -> None:
        """The app is about to show a new result: every figure of the tabs that draw it is
        hidden, "drawing…" in its place, until drawn for it. Called before the status names
        the new result, so that the page hides them first: the visible tab is drawn in place
        after the status (`new_result`), which on a loaded machine took seconds in which its
        figures were the earlier result's (issue 53)."""
        for tab in self.all:
            if tab.follows_result:
                outdate_figures(tab.widget)

    def new_result(self) -> None:
        """The app shows a new result: every tab's cheap views follow it, and every tab but
        the visible one is hidden until drawn (the visible one is drawn next, in place: hidden
        first, a reader would see it blank between the two results, a flicker)."""
        for tab in self.all:
            tab.new_result()
        self._drawn = {}
        for index, tab in enumerate(self.all):
            if tab.follows_result and index != self.widget.selected_index:
                tab.widget.add_class(OUTDATED)

    def draw(self, index: int | None) -> None:
        """Draw tab `index` for the current result, unless its views drew it already."""
        if self._app.report is None or index is None:
            return
        tab = self.all[index]
        if not tab.follows_result:
            tab.draw()
            return
        if self._drawn.get(tab.title) == self._app.result_id:
            return
        result = self._app.result_id
        tab.draw()
        self._drawn[tab.title] = result
        tab.widget.remove_class(OUTDATED)

    def redraw(self, title: AppTab) -> None:
        """Draw tab `title` again (now if it is visible, else when it is next shown)."""
        index = TAB_TITLES.index(AppTab(title))
        self._drawn.pop(self.all[index].title, None)
        if index != self.widget.selected_index:
            self.all[index].widget.add_class(OUTDATED)
        self.draw(self.widget.selected_index)

    def drawn_results(self, title: str | None = None) -> dict[str, int | None]:
        """The id of the result each view of tab `title` (the visible one by default) drew,
        by view: its figures' stamps and its text's. A view with nothing to draw (no
        collective picked, no timeline without a target) is left out."""
        tab = self[title or TAB_TITLES[self.widget.selected_index]]
        figs, text = tab.drawn(self._drawn.get(tab.title))
        return {**{k: drawn_result(f) for k, f in figs.items() if f is not None}, **text}

    def close(self) -> None:
        for tab in self.all:
            tab.close()
