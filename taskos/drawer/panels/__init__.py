"""The drawer's panels, in the order the drawer shows them."""
from taskos.drawer.panels.approvals import ApprovalsPanel
from taskos.drawer.panels.budget import BudgetPanel
from taskos.drawer.panels.children import ChildrenPanel
from taskos.drawer.panels.compactions import CompactionsPanel
from taskos.drawer.panels.cost import CostPanel
from taskos.drawer.panels.curve import CurvePanel
from taskos.drawer.panels.inspector import InspectorPanel
from taskos.drawer.panels.log import ErrorsPanel, HintsPanel
from taskos.drawer.panels.records import AnchorsPanel, TasksPanel

# Approvals first: a call waiting for a person is what the session waits on (T11).
PANELS = (ApprovalsPanel(), BudgetPanel(), CurvePanel(), CompactionsPanel(), AnchorsPanel(), TasksPanel(),
          HintsPanel(), InspectorPanel(), ErrorsPanel(), CostPanel(), ChildrenPanel())

__all__ = ["PANELS", "AnchorsPanel", "ApprovalsPanel", "BudgetPanel", "ChildrenPanel", "CompactionsPanel", "CostPanel",
           "CurvePanel", "ErrorsPanel", "HintsPanel", "InspectorPanel", "TasksPanel"]
