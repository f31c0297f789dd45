"""Dashboard URLs; every view requires sign-in and shows only the person's own sessions."""
from django.urls import path

from taskos.web import actions, approval_views, exports, replays, views, workspace_views

app_name = "web"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("sessions/table", views.session_table, name="session_table"),
    path("sessions/new", views.new_session, name="new"),
    path("sessions/<int:pk>/", views.session_page, name="session"),
    path("sessions/<int:pk>/cancel", actions.cancel, name="cancel"),
    path("sessions/<int:pk>/approvals/<int:approval_id>", approval_views.decide_view,
         name="approval_decide"),
    path("sessions/<int:pk>/message", actions.message, name="message"),
    path("sessions/<int:pk>/compact", actions.compact, name="compact"),
    path("sessions/<int:pk>/pin", actions.pin, name="pin"),
    path("sessions/<int:pk>/pins/<int:anchor_id>/unpin", actions.unpin_view, name="unpin"),
    path("sessions/<int:pk>/events", exports.events_after, name="events"),
    path("sessions/<int:pk>/transcript", exports.transcript_before, name="transcript"),
    path("sessions/<int:pk>/inspect", exports.inspect, name="inspect"),
    path("sessions/<int:pk>/inspect/message", exports.inspect_message, name="inspect_message"),
    path("sessions/<int:pk>/compactions/older", exports.compactions_older,
         name="compactions_older"),
    path("sessions/<int:pk>/compactions/detail", exports.compaction_detail,
         name="compaction_detail"),
    path("sessions/<int:pk>/calls/<int:number>/", exports.call_page, name="call_page"),
    path("sessions/<int:pk>/calls/<int:number>.json", exports.call_json, name="call_json"),
    path("sessions/<int:pk>/calls/latest.json", exports.call_json, name="latest_call_json"),
    path("sessions/<int:pk>/calls/latest/record.json", exports.call_record,
         name="latest_call_record"),
    path("sessions/<int:pk>/calls/<int:number>/record.json", exports.call_record,
         name="call_record"),
    path("sessions/<int:pk>/refs/<str:ref>", exports.read_ref, name="ref"),
    path("sessions/<int:pk>/archive", exports.archive, name="archive"),
    path("sessions/<int:pk>/replay", replays.replay_new, name="replay"),
    path("sessions/<int:pk>/compare", replays.compare_view, name="compare"),
    # the workspace's files (feature T9)
    path("sessions/<int:pk>/workspace/add", workspace_views.add, name="workspace_add"),
    path("sessions/<int:pk>/workspace/file", workspace_views.download_file,
         name="workspace_file"),
    path("sessions/<int:pk>/workspace/preview", workspace_views.preview,
         name="workspace_preview"),
    path("sessions/<int:pk>/workspace.zip", workspace_views.download_zip, name="workspace_zip"),
]
