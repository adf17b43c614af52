"""Where BBR's cliff moves under bursty loss: the figure8-bursty preset's runs read against independent loss."""
