// The event page's map: the event's layers in the StudioMap viewer ({{ map_config|json_script:"event-map-config" }}).
// window.studioViewer is the viewer, for the browser tests that add overlays to it.
import { StudioMap } from "./map.js";

const config = StudioMap.fromScript("event-map-config");
window.studioViewer = StudioMap.viewer(document.getElementById("event-map"), config);
