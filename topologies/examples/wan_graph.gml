# The same six-PoP backbone as wan_graph.graphml, in the Topology Zoo's GML form.
graph [
  Network "dltestbed example WAN"
  node [
    id 0
    label "London"
    Country "United Kingdom"
    Longitude -0.12574
    Internal 1
    Latitude 51.50853
  ]
  node [
    id 1
    label "Paris"
    Country "France"
    Longitude 2.3488
    Internal 1
    Latitude 48.85341
  ]
  node [
    id 2
    label "Amsterdam"
    Country "Netherlands"
    Longitude 4.88969
    Internal 1
    Latitude 52.37403
  ]
  node [
    id 3
    label "Frankfurt"
    Country "Germany"
    Longitude 8.68417
    Internal 1
    Latitude 50.11552
  ]
  node [
    id 4
    label "Geneva"
    Country "Switzerland"
    Longitude 6.14569
    Internal 1
    Latitude 46.20222
  ]
  node [
    id 5
    label "Milan"
    Country "Italy"
    Longitude 9.18951
    Internal 1
    Latitude 45.46427
  ]
  edge [
    source 0
    target 1
    LinkLabel "2.5 Gbps"
    LinkSpeed "2.5"
    LinkSpeedUnits "G"
    LinkSpeedRaw 2500000000.0
  ]
  edge [
    source 0
    target 2
    LinkLabel "622 Mbps"
    LinkSpeed "622"
    LinkSpeedUnits "M"
    LinkSpeedRaw 622000000.0
  ]
  edge [
    source 2
    target 3
    LinkLabel "2.5 Gbps"
    LinkSpeed "2.5"
    LinkSpeedUnits "G"
  ]
  edge [
    source 1
    target 3
    LinkLabel "155 Mbps"
    LinkSpeed "155"
    LinkSpeedUnits "M"
    LinkSpeedRaw 155000000.0
  ]
  edge [
    source 1
    target 4
    LinkLabel "622 Mbps"
    LinkSpeed "622"
    LinkSpeedUnits "M"
    LinkSpeedRaw 622000000.0
  ]
  edge [
    source 4
    target 5
    LinkLabel "unknown"
  ]
  edge [
    source 3
    target 5
    LinkLabel "155 Mbps"
    LinkSpeed "155"
    LinkSpeedUnits "M"
    LinkSpeedRaw 155000000.0
  ]
]
