// A header of the code layer, for the layering check's own test.
#pragma once
