"""Event pages and the layer endpoints of the map viewer."""
from django.urls import path

from frontend.views import events as views

urlpatterns = [
    path("", views.event_list, name="event_list"),
    path("events/<slug:slug>/", views.event_detail, name="event_detail"),
    path("tiles/<int:layer_id>/<int:z>/<int:x>/<int:y>.png", views.layer_tile, name="layer_tile"),
    path("layers/<int:layer_id>/image.png", views.layer_image, name="layer_image"),
    path("layers/<int:layer_id>/geojson", views.layer_geojson, name="layer_geojson"),
    path("layers/<int:layer_id>/value", views.layer_value, name="layer_value"),
]
