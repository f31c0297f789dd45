"""Create the built-in simulated model profile, so a fresh install can run a task at once."""
from django.db import migrations


def create_sim_profile(apps, schema_editor):
    ModelProfile = apps.get_model("runs", "ModelProfile")
    ModelProfile.objects.get_or_create(
        name="sim", defaults={"model": "taskos-sim", "base_url": "", "context_size": 128_000})


def remove_sim_profile(apps, schema_editor):
    ModelProfile = apps.get_model("runs", "ModelProfile")
    ModelProfile.objects.filter(name="sim", sessions__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("runs", "0001_initial")]
    operations = [migrations.RunPython(create_sim_profile, remove_sim_profile)]
